//! Processes as garbage collection's leases name them: this process's id and start time, and
//! whether a (pid, start time) pair is still a running process (a pid alone can be reused).

/// The start time of process `pid` in clock ticks since boot (field 22 of `/proc/PID/stat`),
/// or `None` when there is no such process. A zombie (exited, not yet reaped by its parent) is
/// no process: it runs nothing and holds nothing, and a killed server is one until its parent
/// waits for it.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or ')': the fields
    // after it start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` begins with field 3 (state); the start time is field 22.
    let mut fields = rest.split_whitespace();
    if matches!(fields.next(), Some("Z") | Some("X") | Some("x")) {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// This process: its id and start time.
pub fn current() -> (u32, u64) {
    let pid = std::process::id();
    (pid, start_time(pid).unwrap_or(0))
}

/// Whether the process that had id `pid` and start time `start` is still running.
pub fn alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let (pid, start) = current();
        assert!(start > 0);
        assert!(alive(pid, start));
        assert!(!alive(pid, start + 1), "a reused pid has another start time");
        assert!(!alive(u32::MAX, start));
    }
}
