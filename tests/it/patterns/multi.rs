//! Several locks as one: a `MultiLock` of mixed kinds in a scoped loop (and contended by other
//! tasks), a `RedLock` over three servers in a loop; and fencing: the token of each hold written
//! to a `FencedValue`, increasing across iterations and clients, a stale token refused.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redisson_lock::{Client, LockError, LockOwner, MemberLock, MultiLock, MultiLockGuard, RedLock};

use super::*;
use crate::support::{fixture, fixture_with_other, servers};

/// The members: (kind, name) on one client.
const MEMBERS: [(Kind, &str); 7] = [
    (Kind::Reentrant, "pat:multi:a"),
    (Kind::Fair, "pat:multi:b"),
    (Kind::Fenced, "pat:multi:c"),
    (Kind::Spin, "pat:multi:d"),
    (Kind::Write, "pat:multi:e"),
    (Kind::NonReentrant, "pat:multi:f"),
    (Kind::NonReentrantFair, "pat:multi:g"),
];

fn mixed(client: &Client) -> MultiLock {
    let members: Vec<MemberLock> = MEMBERS
        .iter()
        .map(|&(kind, name)| {
            with_kind!(kind, client, name.to_owned(), |lock| MemberLock::from(lock))
        })
        .collect();
    MultiLock::new(members).unwrap()
}

/// Every member held once by `owner`.
async fn each_held_once(client: &Client, raw: &mut MultiplexedConnection, owner: LockOwner) {
    for (kind, name) in MEMBERS {
        let field = kind.field(client, owner);
        assert_held_once(raw, name, &field).await;
    }
}

async fn take(m: &MultiLock, i: usize) -> Result<MultiLockGuard, LockError> {
    match i % 3 {
        0 => m.lock().await,
        1 => Ok(m
            .try_lock_for(WAIT)
            .await?
            .expect("no multi-lock within the wait")),
        _ => m.lock_with_lease(Duration::from_secs(30)).await,
    }
}

async fn mixed_loop() {
    let (_server, client, mut raw) = fixture().await;
    let m = mixed(&client);
    for i in 0..iterations() {
        let _guard = take(&m, i)
            .await
            .unwrap_or_else(|e| panic!("iteration {i}: {e}"));
        do_work().await.unwrap();
        each_held_once(&client, &mut raw, LockOwner::current()).await;
    }
    for (_, name) in MEMBERS {
        assert_freed(&raw, name).await;
    }
}

shapes!(multilock_of_mixed_kinds_in_a_scoped_loop => mixed_loop);

/// Three tasks take the mixed multi-lock in turns, a fourth takes one member alone: nobody is
/// inside together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multilock_of_mixed_kinds_contended_by_tasks() {
    let (_server, client, raw, other) = fixture_with_other().await;
    let section = Occupancy::default();
    let mut tasks = Vec::new();
    for t in 0..3 {
        let m = mixed(if t == 0 { &other } else { &client });
        let section = section.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..iterations() {
                let _guard = take(&m, i).await?;
                let _inside = section.enter("multi");
                do_work().await?;
            }
            Ok::<(), LockError>(())
        }));
    }
    let fair = client.get_fair_lock(MEMBERS[1].1);
    let single = section.clone();
    tasks.push(tokio::spawn(async move {
        for _ in 0..iterations() {
            let _guard = fair.lock().await?;
            let _inside = single.enter("member");
            do_work().await?;
        }
        Ok(())
    }));
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("a contender stalled")
            .unwrap()
            .unwrap();
    }
    assert_eq!(section.entries(), 4 * iterations());
    for (_, name) in MEMBERS {
        assert_freed(&raw, name).await;
    }
}

/// A RedLock over three independent servers, in a scoped loop: each node holds it once per
/// iteration and nothing is left after.
async fn redlock_loop() {
    let nodes = servers(3);
    let mut clients = Vec::new();
    let mut raws = Vec::new();
    for s in &nodes {
        clients.push(s.client().await);
        raws.push(s.conn().await);
    }
    let red = RedLock::new(clients.iter().map(|c| c.get_lock("pat:multi:red"))).unwrap();
    for i in 0..iterations() {
        let guard = match i % 2 {
            0 => red.lock().await.unwrap(),
            _ => red
                .try_lock_for(WAIT)
                .await
                .unwrap()
                .expect("no redlock within the wait"),
        };
        // Every node is up and free: a member missing here was refused by its own client.
        assert_eq!(
            guard.held_nodes(),
            vec![0, 1, 2],
            "iteration {i}: a free member was not taken"
        );
        for (c, raw) in clients.iter().zip(raws.iter_mut()) {
            assert_held_once(
                raw,
                "pat:multi:red",
                &Kind::Reentrant.field(c, LockOwner::current()),
            )
            .await;
        }
    }
    for raw in &raws {
        assert_freed(raw, "pat:multi:red").await;
    }
}

shapes!(redlock_in_a_scoped_loop => redlock_loop);

/// Each hold's token written to a fenced store: tokens grow across iterations and clients,
/// every write under the lock is accepted, and a stale token is refused.
async fn fenced_store() {
    let (_server, client, _raw, other) = fixture_with_other().await;
    let mut writers = Vec::new();
    for w in 0..2 {
        let c = if w == 0 {
            client.clone()
        } else {
            other.clone()
        };
        writers.push(tokio::spawn(async move {
            let lock = c.get_fenced_lock("pat:multi:fenced");
            let store = c.get_fenced_value("pat:multi:store");
            let mut tokens = Vec::new();
            for i in 0..iterations() {
                let guard = lock.lock().await?;
                let token = guard.token();
                assert!(
                    store.set(token, format!("{w}:{i}")).await?,
                    "token {token} refused"
                );
                assert_eq!(store.last_token().await?, Some(token));
                tokens.push(token);
            }
            Ok::<Vec<i64>, LockError>(tokens)
        }));
    }
    let mut all = Vec::new();
    for w in writers {
        let tokens = tokio::time::timeout(Duration::from_secs(120), w)
            .await
            .expect("a writer stalled")
            .unwrap()
            .unwrap();
        assert!(
            tokens.windows(2).all(|t| t[0] < t[1]),
            "tokens not increasing: {tokens:?}"
        );
        all.extend(tokens);
    }
    all.sort_unstable();
    let n = all.len();
    all.dedup();
    assert_eq!(all.len(), n, "a token was handed out twice");
    let store = client.get_fenced_value("pat:multi:store");
    let newest = *all.last().unwrap();
    assert_eq!(store.last_token().await.unwrap(), Some(newest));
    let before = store.get().await.unwrap();
    assert!(
        !store.set(newest - 1, "stale").await.unwrap(),
        "a stale token was accepted"
    );
    assert_eq!(store.get().await.unwrap(), before);
}

shapes!(fenced_token_written_to_a_store => fenced_store);
