//! The read-write lock's client-side writer preference: per lock name, the write acquires of
//! this client that are waiting, each with a ticket in arrival order, and a wake-up for the
//! readers held back behind them.
//!
//! Redisson's data prefers readers (a read enters whenever the mode is `read`), so readers that
//! release and take again at once starve a writer forever. This client cannot change the data
//! Java shares, but it can hold back its own new readers while one of its writers waits: the
//! readers already in release, the lock goes free, the writer's wake-up finds it free.
//!
//! A reader waits only for the writers that were already waiting when it came (their tickets
//! are below the next ticket it saw), never for writers that began to wait after it: local
//! writers that wait in turn, one always waiting, would otherwise hold every local reader back
//! for as long as they keep coming (phase-fair, as a ticket lock).

use std::collections::BTreeSet;
use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// The waiting writers of one name.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// The tickets of the writers waiting now, and the next ticket to hand out.
    tickets: Mutex<Tickets>,
    /// Woken each time a waiting writer of the name stops waiting.
    changed: Notify,
}

#[derive(Debug, Default)]
struct Tickets {
    waiting: BTreeSet<u64>,
    next: u64,
}

impl Waiting {
    /// Whether a writer that came before ticket `before` still waits.
    fn ahead_of(&self, before: u64) -> bool {
        self.tickets
            .lock()
            .waiting
            .first()
            .is_some_and(|&t| t < before)
    }
}

/// The waiting writers of one client, by lock name.
#[derive(Debug, Default)]
pub(crate) struct Writers {
    map: DashMap<Arc<str>, Arc<Waiting>>,
}

impl Writers {
    /// Counts a write acquire of `key` as waiting, with the next ticket, until the returned
    /// guard drops.
    pub(crate) fn waiting(&self, key: &Arc<str>) -> WriterWaits<'_> {
        let entry = self.map.entry(key.clone()).or_default();
        let ticket = {
            let mut tickets = entry.tickets.lock();
            let ticket = tickets.next;
            tickets.next += 1;
            tickets.waiting.insert(ticket);
            ticket
        };
        drop(entry);
        WriterWaits {
            writers: self,
            key: key.clone(),
            ticket,
        }
    }

    /// Waits until every write acquire of this client that waits on `key` now has stopped
    /// waiting (got in, or gave up), or `deadline` passes (`false`: still held back at the
    /// deadline; `None`: no deadline). Writers that begin to wait meanwhile do not count.
    pub(crate) async fn clear(
        &self,
        key: &Arc<str>,
        deadline: Option<tokio::time::Instant>,
    ) -> bool {
        let Some(waiting) = self.map.get(key).map(|e| e.value().clone()) else {
            return true;
        };
        // Every ticket below this one was handed out before this reader came.
        let before = waiting.tickets.lock().next;
        loop {
            let notified = waiting.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Checked after registering: a writer's wake-up comes after its ticket is gone.
            if !waiting.ahead_of(before) {
                return true;
            }
            match deadline {
                None => notified.await,
                Some(d) => {
                    if tokio::time::timeout_at(d, notified).await.is_err() {
                        return !waiting.ahead_of(before);
                    }
                }
            }
        }
    }

    /// Whether a write acquire of this client waits on `key` now.
    pub(crate) fn any(&self, key: &Arc<str>) -> bool {
        self.map
            .get(key)
            .is_some_and(|e| !e.tickets.lock().waiting.is_empty())
    }
}

/// A write acquire counted as waiting; uncounted (and the held-back readers woken to look
/// again) when dropped, however the acquire ends.
#[derive(Debug)]
pub(crate) struct WriterWaits<'a> {
    writers: &'a Writers,
    key: Arc<str>,
    ticket: u64,
}

impl Drop for WriterWaits<'_> {
    fn drop(&mut self) {
        if let Entry::Occupied(o) = self.writers.map.entry(self.key.clone()) {
            let empty = {
                let mut tickets = o.get().tickets.lock();
                tickets.waiting.remove(&self.ticket);
                tickets.waiting.is_empty()
            };
            let waiting = if empty { o.remove() } else { o.get().clone() };
            waiting.changed.notify_waiters();
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

    // Paused time: a reader still held back at the end fails at once instead of hanging.
    #[tokio::test(start_paused = true)]
    async fn a_reader_waits_only_for_the_writers_that_came_before_it() {
        use std::future::Future;
        let writers = Writers::default();
        let key: Arc<str> = Arc::from("k");
        let first = writers.waiting(&key);
        let (arrived_tx, arrived_rx) = tokio::sync::oneshot::channel();
        let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
        let reader = async {
            let clear = writers.clear(&key, None);
            tokio::pin!(clear);
            // Polled once: the reader has come (and seen the tickets handed out so far).
            let pending = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(clear.as_mut().poll(cx).is_pending())
            });
            assert!(pending.await);
            let _ = arrived_tx.send(());
            let bound = std::time::Duration::from_secs(60);
            let _ = done_tx.send(tokio::time::timeout(bound, clear).await.unwrap_or(false));
        };
        let writers_in_turn = async {
            arrived_rx.await.unwrap();
            // A writer that begins to wait after the reader came, and still waits.
            let later = writers.waiting(&key);
            tokio::task::yield_now().await;
            assert!(
                done_rx.try_recv().is_err(),
                "a reader passed a waiting writer"
            );
            drop(first);
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            assert!(writers.any(&key));
            later
        };
        let (_, later) = tokio::join!(reader, writers_in_turn);
        assert_eq!(
            done_rx.try_recv(),
            Ok(true),
            "the reader waited for a later writer"
        );
        drop(later);
        assert!(writers.map.is_empty());
    }
}
