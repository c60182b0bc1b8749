//! The read-write lock's client-side writer preference: per lock name, how many write acquires
//! of this client are waiting, and a wake-up for the readers held back behind them.
//!
//! Redisson's data prefers readers (a read enters whenever the mode is `read`), so readers that
//! release and take again at once starve a writer forever. This client cannot change the data
//! Java shares, but it can hold back its own new readers while one of its writers waits: the
//! readers already in release, the lock goes free, the writer's wake-up finds it free.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use tokio::sync::Notify;

/// The waiting writers of one name.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// Changed only under the map's entry lock; read without it.
    count: AtomicU32,
    /// Woken when the last waiting writer of the name stops waiting.
    clear: Notify,
}

impl Waiting {
    /// Whether a writer still waits (false once the last one stopped).
    fn busy(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }
}

/// The waiting writers of one client, by lock name.
#[derive(Debug, Default)]
pub(crate) struct Writers {
    map: DashMap<Arc<str>, Arc<Waiting>>,
}

impl Writers {
    /// Counts a write acquire of `key` as waiting until the returned guard drops.
    pub(crate) fn waiting(&self, key: &Arc<str>) -> WriterWaits<'_> {
        let entry = self.map.entry(key.clone()).or_default();
        entry.count.fetch_add(1, Ordering::AcqRel);
        drop(entry);
        WriterWaits {
            writers: self,
            key: key.clone(),
        }
    }

    /// Waits until no write acquire of this client waits on `key`, or `deadline` passes
    /// (`false`: still held back at the deadline; `None`: no deadline).
    pub(crate) async fn clear(
        &self,
        key: &Arc<str>,
        deadline: Option<tokio::time::Instant>,
    ) -> bool {
        loop {
            let Some(waiting) = self.map.get(key).map(|e| e.value().clone()) else {
                return true;
            };
            let notified = waiting.clear.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Checked after registering: the last writer's wake-up comes after its count drops.
            if !waiting.busy() {
                continue;
            }
            match deadline {
                None => notified.await,
                Some(d) => {
                    if tokio::time::timeout_at(d, notified).await.is_err() {
                        return !waiting.busy();
                    }
                }
            }
        }
    }

    /// Whether a write acquire of this client waits on `key` now.
    pub(crate) fn any(&self, key: &Arc<str>) -> bool {
        self.map.get(key).is_some_and(|e| e.busy())
    }
}

/// A write acquire counted as waiting; uncounted (and the held-back readers woken when it was
/// the last) when dropped, however the acquire ends.
#[derive(Debug)]
pub(crate) struct WriterWaits<'a> {
    writers: &'a Writers,
    key: Arc<str>,
}

impl Drop for WriterWaits<'_> {
    fn drop(&mut self) {
        if let Entry::Occupied(o) = self.writers.map.entry(self.key.clone()) {
            if o.get().count.fetch_sub(1, Ordering::AcqRel) == 1 {
                o.remove().clear.notify_waiters();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn readers_wait_for_the_last_writer() {
        let writers = Writers::default();
        let key: Arc<str> = Arc::from("k");
        assert!(writers.clear(&key, None).await);
        let a = writers.waiting(&key);
        let b = writers.waiting(&key);
        assert!(writers.any(&key));
        let past = tokio::time::Instant::now();
        assert!(!writers.clear(&key, Some(past)).await);
        drop(a);
        assert!(writers.any(&key));
        let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
        let waiter = async {
            let ok = writers.clear(&key, None).await;
            let _ = done_tx.send(ok);
        };
        let dropper = async {
            tokio::task::yield_now().await;
            assert!(
                done_rx.try_recv().is_err(),
                "a reader passed a waiting writer"
            );
            drop(b);
        };
        tokio::join!(waiter, dropper);
        assert!(!writers.any(&key));
        assert!(writers.map.is_empty());
    }
}
