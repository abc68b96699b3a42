"""A client of trove's sandbox file API written the way the seed's Python example is
(sandbox-file-operations.md, "Python Integration", "Batch Operations", "Error Handling",
"Large Files"), on the standard library only: the one change is the session token, sent as a
bearer. Usage: sandbox_file_api.py BASE_URL SESSION_TOKEN. Exits non-zero on any surprise."""

import json
import sys
import urllib.error
import urllib.request


class SandboxFileAPI:
    def __init__(self, base_url="http://localhost:8080", token=None):
        self.base_url = base_url.rstrip("/")
        self.token = token

    def _post(self, path, payload):
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            data=json.dumps(payload).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def read_file(self, file_path, start_line=None, end_line=None):
        payload = {"file": file_path}
        if start_line is not None:
            payload["start_line"] = start_line
        if end_line is not None:
            payload["end_line"] = end_line
        return self._post("/v1/file/read", payload)

    def write_file(self, file_path, content, append=False):
        return self._post("/v1/file/write", {"file": file_path, "content": content, "append": append})

    def replace_in_file(self, file_path, old_str, new_str):
        return self._post("/v1/file/replace", {"file": file_path, "old_str": old_str, "new_str": new_str})

    def search_files(self, pattern, directory="/home/gem/workspace"):
        return self._post("/v1/file/find", {"path": directory, "glob": pattern})


def batch_process_files(api, directory, pattern):
    files_result = api.search_files(pattern, directory)
    for file_path in files_result["data"]["files"]:
        content_result = api.read_file(file_path)
        if content_result["success"]:
            content = content_result["data"]["content"]
            output_path = file_path.replace(".txt", "_processed.txt")
            api.write_file(output_path, content.upper())


def safe_file_operation(api, operation, **kwargs):
    try:
        result = operation(**kwargs)
        if result["success"]:
            return result["data"]
        error = result.get("data") or {}
        if error.get("error_type") == "not_found":
            print("File does not exist")
            return None
        print(f"Operation failed: {result['message']}")
        return None
    except urllib.error.URLError as exc:
        print(f"Network error: {exc}")
        return None
    except json.JSONDecodeError as exc:
        print(f"JSON decode error: {exc}")
        return None


def read_large_file(api, file_path, chunk_size=1000):
    total_lines = 0
    content_parts = []
    while True:
        result = api.read_file(file_path, start_line=total_lines, end_line=total_lines + chunk_size)
        if not result["success"] or not result["data"]["content"]:
            break
        content = result["data"]["content"]
        content_parts.append(content)
        total_lines += chunk_size
        if len(content.splitlines()) < chunk_size:
            break
    return "".join(content_parts)


def main():
    api = SandboxFileAPI(sys.argv[1], sys.argv[2])

    api.write_file("/home/gem/workspace/config.json", '{"debug": false}\n')
    config = api.read_file("/home/gem/workspace/config.json")
    print(config["data"]["content"])
    assert config["data"]["content"] == '{"debug": false}\n', config

    api.write_file("/home/gem/workspace/app.log", "Process started\n", append=True)

    files = api.search_files("*.py", "/home/gem/workspace/src")
    for file_path in files["data"]["files"]:
        print(f"Found: {file_path}")

    result = api.replace_in_file("/home/gem/workspace/config.json", '"debug": false', '"debug": true')
    assert result["success"], result

    batch_process_files(api, "/home/gem/workspace/data", "*.txt")

    missing = safe_file_operation(api, api.read_file, file_path="/home/gem/workspace/data.txt")
    assert missing is None

    lines = "".join(f"line {i}\n" for i in range(2345))
    api.write_file("/home/gem/workspace/big.txt", lines)
    assert read_large_file(api, "/home/gem/workspace/big.txt") == lines
    print("ok")


if __name__ == "__main__":
    main()
