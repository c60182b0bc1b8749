//! Schedules of the channel registry, explored with `shuttle` (`sched::explore`): the last
//! waiter of a channel leaving (its entry dropped, an unsubscribe queued) while a new waiter
//! registers for the same name, with the subscriber task deciding from the registry what to
//! (un)subscribe. The registry code is the crate's own (`entry`, `Channel::drop`, `live`,
//! `plan`, `subscribed`, `wake`); the server side is a stand-in that confirms every subscription
//! at once (the connection itself is tested against real servers in `tests/it/`).

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use shuttle::future::{block_on, spawn};
use tokio::sync::mpsc;

use super::*;
use crate::sched::{explore, point};

const NAME: &str = "redisson_lock__channel:{lock}";
/// Tells the stand-in subscriber task that every earlier command was sent.
const END: &str = "";

fn shared() -> (Arc<Shared>, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        channels: DashMap::new(),
        commands: tx,
        connections: watch::channel(0).0,
    });
    (shared, rx)
}

/// The subscriber task's registry side (`serve` and `apply`): takes the queued names, decides
/// from the registry at execution time (`plan`), sends (a point: the round trip), books the
/// outcome (`subscribed`). Returns what the server has subscribed once `END` is seen.
async fn subscriber(
    shared: Weak<Shared>,
    mut commands: mpsc::UnboundedReceiver<String>,
) -> HashSet<String> {
    let mut active = HashSet::new();
    while let Some(name) = commands.recv().await {
        let mut names = vec![name];
        while let Ok(n) = commands.try_recv() {
            names.push(n);
        }
        let end = names.iter().any(|n| n == END);
        names.retain(|n| n != END);
        let Some(sh) = shared.upgrade() else { break };
        let (subscribe, unsubscribe) = plan(&sh, &active, names);
        drop(sh);
        point();
        for n in &unsubscribe {
            active.remove(n);
        }
        let Some(sh) = shared.upgrade() else { break };
        subscribed(&sh, &mut active, subscribe, &[]);
        if end {
            break;
        }
    }
    active
}

/// `PubSub::subscribe_with` without its timeout (no tokio timer under shuttle): the entry, then
/// its confirmation.
async fn subscribe(shared: &Arc<Shared>) -> Arc<Channel> {
    let channel = entry(shared, NAME, Wake::Lock);
    let mut state = channel.state.subscribe();
    let s = state
        .wait_for(|s| *s != SubState::Pending)
        .await
        .map(|s| s.clone());
    assert_eq!(s.ok(), Some(SubState::Confirmed));
    channel
}

/// The last waiter on a channel leaves (its `Arc` dropped: the entry goes, an unsubscribe is
/// queued) while a new waiter subscribes to the same name. Whatever the order, the new waiter
/// gets a confirmed entry that is the registry's live one (so messages reach it), and the server
/// stays subscribed while it waits. A dying entry shared, or a fresh one removed by the old
/// entry's drop, leaves the new waiter unconfirmed (a deadlock, reported with its schedule) or
/// unsubscribed.
#[test]
fn a_new_waiter_never_shares_a_dying_entry() {
    explore(|| {
        let (shared, commands) = shared();
        let task = spawn(subscriber(Arc::downgrade(&shared), commands));
        let leaver = {
            let shared = shared.clone();
            spawn(async move {
                let channel = subscribe(&shared).await;
                drop(channel);
            })
        };
        let joiner = {
            let shared = shared.clone();
            spawn(async move { subscribe(&shared).await })
        };
        let (channel, active) = block_on(async {
            leaver.await.unwrap();
            let channel = joiner.await.unwrap();
            let _ = shared.commands.send(END.to_owned());
            (channel, task.await.unwrap())
        });
        let live = live(&shared, NAME).expect("the waiter's entry is in the registry");
        assert!(
            Arc::ptr_eq(&live, &channel),
            "a message would not reach the waiter"
        );
        assert!(
            active.contains(NAME),
            "the server unsubscribed a live channel"
        );
        // A release message reaches it.
        let notified = channel.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        wake(&live, b"0");
        assert!(futures_util::FutureExt::now_or_never(notified.as_mut()).is_some());
    });
}
