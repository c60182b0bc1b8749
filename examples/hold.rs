//! Holds a lock so the operator CLI has something to look at, until the lock is force-unlocked
//! (the waiter then gets it) or the process is stopped. Needs `REDIS_URL`. Run:
//!
//! `REDIS_URL=redis://127.0.0.1:6379 cargo run --example hold -- NAME [KIND]`
//!
//! then `redisson-lock inspect NAME` (see docs/cli.md). KIND:
//! * `reentrant` (default): a task takes the lock twice (hold count 2) and a second client
//!   waits for it;
//! * `fair`: the same with a fair lock, so the waiter is queued with a deadline;
//! * `fenced`: a fenced lock taken twice (the token counter moves at each acquisition);
//! * `rw`: two readers of one client hold a read-write lock and a second client waits to write.
//! * `permits`: a permit-expirable semaphore of 3 permits, one taken with a 10-minute lease and
//!   one without, until Ctrl-C (then both are released).
use redisson_lock::{Client, Lock, LockError, LockKind, LockOwner};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").map_err(|_| "set REDIS_URL")?;
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "orders:42".to_owned());
    let kind = args.next().unwrap_or_else(|| "reentrant".to_owned());
    if !["reentrant", "fair", "fenced", "rw", "permits"].contains(&kind.as_str()) {
        return Err(
            format!("unknown kind `{kind}`: reentrant, fair, fenced, rw or permits").into(),
        );
    }
    if kind == "permits" {
        return hold_permits(&url, &name).await;
    }
    let holder = Client::connect(&url).await?;
    let waiter = Client::connect(&url).await?;
    // The owner is the task (as a thread is in Java): `<client uuid>:<task id>`.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let held = tokio::spawn(hold(holder, name.clone(), kind.clone(), tx));
    // The waiter starts once the holder holds.
    let _ = rx.await;
    let waited = tokio::spawn(async move {
        let owner = match kind.as_str() {
            "fair" => waiter.get_fair_lock(name).lock().await?.owner(),
            "fenced" => waiter.get_fenced_lock(name).lock().await?.owner(),
            "rw" => waiter
                .get_read_write_lock(name)
                .write_lock()
                .lock()
                .await?
                .owner(),
            _ => waiter.get_lock(name).lock().await?.owner(),
        };
        println!("the waiter got the lock as {}:{}", waiter.id(), owner.id());
        Ok::<_, LockError>(())
    });
    tokio::select! {
        r = waited => r??,
        _ = tokio::signal::ctrl_c() => println!("interrupted"),
    }
    held.abort();
    Ok(())
}

async fn hold(
    client: Client,
    name: String,
    kind: String,
    held: tokio::sync::oneshot::Sender<()>,
) -> Result<(), LockError> {
    match kind.as_str() {
        "rw" => {
            let read = client.get_read_write_lock(name.clone()).read_lock();
            let a = read.with_owner(LockOwner::new(1)).lock().await?;
            let _b = read.with_owner(LockOwner::new(2)).lock().await?;
            println!("reading `{name}` as {0}:1 and {0}:2", client.id());
            let _ = held.send(());
            a.lost().await
        }
        "fair" => twice(&client, client.get_fair_lock(name.clone()), held).await?,
        "fenced" => twice(&client, client.get_fenced_lock(name.clone()), held).await?,
        "reentrant" => twice(&client, client.get_lock(name.clone()), held).await?,
        other => unreachable!("kind `{other}` checked in main"),
    }
    println!("the hold was lost (force-unlocked?)");
    Ok(())
}

/// Takes `lock` twice (hold count 2) and waits until the hold is lost.
async fn twice<K: LockKind>(
    client: &Client,
    lock: Lock<K>,
    held: tokio::sync::oneshot::Sender<()>,
) -> Result<(), LockError> {
    let outer = lock.lock().await?;
    // Re-entry on purpose, through the guard (a second `lock()` of this task is refused).
    let _inner = outer.reenter().await?;
    let (name, id) = (lock.name(), outer.owner().id());
    println!("holding `{name}` twice as {}:{id}", client.id());
    let _ = held.send(());
    outer.lost().await;
    Ok(())
}

/// Takes two permits of a 3-permit semaphore (one leased for 10 minutes) until Ctrl-C.
async fn hold_permits(url: &str, name: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::connect(url).await?;
    let sem = client.get_permit_expirable_semaphore(name);
    sem.try_set_permits(3).await?;
    let leased = sem
        .with_lease(std::time::Duration::from_secs(600))
        .acquire()
        .await?;
    let kept = sem.acquire().await?;
    println!("holding permits {leased} (10 min lease) and {kept} (no lease) of `{name}`");
    tokio::signal::ctrl_c().await?;
    sem.release(&leased).await?;
    sem.release(&kept).await?;
    Ok(())
}
