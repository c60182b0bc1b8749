//! Schedules of the holds' in-process concurrency, explored with `shuttle` (`sched::explore`):
//! the end of an epoch against the tasks waiting for it, and the holds map's `forget` against a
//! new acquisition of the same hold. The code under test is the crate's own; `sched::point`s in
//! it let shuttle switch tasks where they race.

use std::sync::Arc;

use shuttle::future::{block_on, spawn};

use super::*;
use crate::sched::explore;

fn kind() -> HoldKind {
    HoldKind {
        name: "lock",
        channel_prefix: "redisson_lock__channel",
        layout: crate::scripts::Layout::Plain,
        publishes: true,
    }
}

fn names() -> (Arc<str>, Arc<str>) {
    ("lock".into(), "client:1".into())
}

/// `LockGuard::lost` waits for the epoch to end (`Hold::epoch_ended`) while the watchdog or a
/// release ends it (`Hold::lose`): whatever the order, every waiter wakes (no lost wake-up: a
/// waiter registers before it reads the epoch). A waiter that never wakes is a deadlock, which
/// shuttle reports with its schedule.
#[test]
fn an_ended_epoch_wakes_every_waiter() {
    explore(|| {
        let holds = Holds::default();
        let (key, field) = names();
        let hold = holds.hold(&key, &field, Renewal::Hash, kind());
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let hold = hold.clone();
                spawn(async move { hold.epoch_ended(0).await })
            })
            .collect();
        let loser = {
            let hold = hold.clone();
            spawn(async move { hold.lose(0) })
        };
        block_on(async move {
            assert!(loser.await.unwrap(), "the epoch was ended once");
            for w in waiters {
                w.await.unwrap();
            }
        });
        assert_eq!(hold.epoch(), 1);
    });
}

/// An acquisition that ends without a grant forgets its hold (`Forget`, `Holds::forget`) while
/// another acquisition of the same owner takes the hold from the map and books a watchdog
/// grant: the hold with the grant must stay in the map, or the watchdog (which renews what
/// `Holds::watched` lists) would never renew it and the lock would expire under its guard.
#[test]
fn forgetting_a_hold_never_drops_one_in_use() {
    explore(|| {
        let holds = Arc::new(Holds::default());
        let (key, field) = names();
        let leaver = {
            let (holds, key, field) = (holds.clone(), key.clone(), field.clone());
            spawn(async move {
                let hold = holds.hold(&key, &field, Renewal::Hash, kind());
                // Its try found the lock held and its wait ended: nothing booked.
                let gate = hold.gate().await;
                drop(gate);
                holds.forget(&hold);
            })
        };
        let taker = {
            let (holds, key, field) = (holds.clone(), key.clone(), field.clone());
            spawn(async move {
                let hold = holds.hold(&key, &field, Renewal::Hash, kind());
                let mut gate = hold.gate().await;
                gate.taken(Lease::Watchdog);
                hold.set_watchdog(&gate);
                drop(gate);
                hold
            })
        };
        let hold = block_on(async move {
            leaver.await.unwrap();
            taker.await.unwrap()
        });
        let watched = holds.watched();
        assert!(
            watched.iter().any(|(h, _)| Arc::ptr_eq(h, &hold)),
            "the hold with a watchdog grant is not in the map: the watchdog would not renew it"
        );
        // Once its grant is gone and nobody uses it, it goes.
        drop(watched);
        block_on(async {
            let mut gate = hold.gate().await;
            gate.take_latest();
        });
        holds.forget(&hold);
        assert_eq!(holds.len(), 0);
    });
}

/// The watchdog's snapshot (`Holds::watched`) races the owner's release of a hold Redis already
/// lost (which ends the epoch) and its next acquisition (which starts a new watch in the new
/// epoch). The renewal sent for the snapshot runs on the server at some point; if that is
/// before the new acquisition's script, it finds the field gone. That verdict may end the epoch
/// the snapshot saw watched, never the new hold's: Redis has the new hold, and a client that
/// thinks it lost never releases it (the lock would stay taken until its lease ran out).
/// Seen in the fault campaign when the snapshot read the watch flag before the epoch.
#[test]
fn a_renewal_verdict_never_ends_a_later_hold() {
    use std::sync::atomic::AtomicBool;
    explore(|| {
        let holds = Arc::new(Holds::default());
        let (key, field) = names();
        let hold = holds.hold(&key, &field, Renewal::Hash, kind());
        // Hold 1: a watchdog grant whose field Redis no longer has (its lease ran out).
        block_on(async {
            let mut gate = hold.gate().await;
            gate.taken(Lease::Watchdog);
            hold.set_watchdog(&gate);
        });
        // Whether the owner's field is in Redis.
        let on_server = Arc::new(AtomicBool::new(false));
        let owner = {
            let (hold, on_server) = (hold.clone(), on_server.clone());
            spawn(async move {
                // The release finds the hold gone (`Release::NotHeld`): the epoch ends.
                let mut gate = hold.gate().await;
                gate.take_latest();
                hold.lose_gated(&mut gate);
                hold.set_watchdog(&gate);
                drop(gate);
                // The next acquisition: the gate is taken, the script runs (the field is
                // back), the reply is booked in the gate's epoch.
                let mut gate = hold.gate().await;
                crate::sched::point();
                on_server.store(true, Ordering::SeqCst);
                crate::sched::point();
                gate.taken(Lease::Watchdog);
                hold.set_watchdog(&gate);
                gate.epoch()
            })
        };
        let watchdog = {
            let (holds, on_server) = (holds.clone(), on_server.clone());
            spawn(async move {
                for (h, epoch) in holds.watched() {
                    // The renewal runs on the server now; "gone" ends the snapshot's epoch.
                    crate::sched::point();
                    if !on_server.load(Ordering::SeqCst) {
                        h.lose(epoch);
                    }
                }
            })
        };
        block_on(async move {
            let taken_in = owner.await.unwrap();
            watchdog.await.unwrap();
            assert!(on_server.load(Ordering::SeqCst));
            assert_eq!(
                hold.epoch(),
                taken_in,
                "the new hold, which Redis has, was reported lost by a renewal that ran before it"
            );
        });
    });
}
