//! Holds a lock so the operator CLI has something to look at: takes the reentrant lock `NAME`
//! twice (hold count 2, renewed by the watchdog), and a second client queues for it in the
//! background, until the lock is force-unlocked or the process is stopped.
//! Needs `REDIS_URL`. Run: `REDIS_URL=redis://127.0.0.1:6379 cargo run --example hold -- NAME`,
//! then `redisson-lock inspect NAME` (see docs/cli.md).
use redisson_lock::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").map_err(|_| "set REDIS_URL")?;
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "orders:42".to_owned());
    let holder = Client::connect(&url).await?;
    let lock = holder.get_lock(name.clone());
    let outer = lock.lock().await?;
    let inner = lock.lock().await?;
    println!(
        "holding `{name}` twice as {}:{}",
        holder.id(),
        outer.owner().id()
    );
    let waiter = Client::connect(&url).await?;
    let wait = tokio::spawn(async move { waiter.get_lock(name).lock().await.map(|g| g.detach()) });
    tokio::select! {
        _ = outer.lost() => println!("the hold was lost (force-unlocked?)"),
        _ = tokio::signal::ctrl_c() => println!("interrupted"),
    }
    drop(inner);
    wait.abort();
    Ok(())
}
