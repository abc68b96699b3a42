//! A memory backend with hooks run before each put and each read: a disk that fills up, a
//! tripwire, a read counter.

use trove::object::{Backend, MemoryBackend};

/// Runs before a put (with the key and the length) or a read (with the key and the offset);
/// an error it returns is the operation's.
pub type Hook = Box<dyn Fn(&str, u64) -> trove::Result<()> + Send + Sync>;

#[derive(Default)]
pub struct Hooked {
    inner: MemoryBackend,
    before_put: Option<Hook>,
    before_read: Option<Hook>,
}

impl Hooked {
    pub fn on_put(mut self, hook: impl Fn(&str, u64) -> trove::Result<()> + Send + Sync + 'static) -> Self {
        self.before_put = Some(Box::new(hook));
        self
    }

    pub fn on_read(mut self, hook: impl Fn(&str, u64) -> trove::Result<()> + Send + Sync + 'static) -> Self {
        self.before_read = Some(Box::new(hook));
        self
    }
}

impl Backend for Hooked {
    fn put(&self, key: &str, bytes: &[u8]) -> trove::Result<()> {
        if let Some(hook) = &self.before_put {
            hook(key, bytes.len() as u64)?;
        }
        self.inner.put(key, bytes)
    }
    fn get_range(&self, key: &str, offset: u64, len: u64) -> trove::Result<Vec<u8>> {
        if let Some(hook) = &self.before_read {
            hook(key, offset)?;
        }
        self.inner.get_range(key, offset, len)
    }
    fn list(&self, prefix: &str) -> trove::Result<Vec<String>> {
        self.inner.list(prefix)
    }
    fn size(&self, key: &str) -> trove::Result<u64> {
        self.inner.size(key)
    }
    fn delete(&self, key: &str) -> trove::Result<()> {
        self.inner.delete(key)
    }
}
