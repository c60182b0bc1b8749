//! A permit-expirable semaphore: permits carry ids and leases, so a permit whose holder died
//! returns to the pool by itself. Uses `REDIS_URL`, or a throwaway `redis-server` on a free port.
//! Run: `cargo run --example permit_semaphore`.
mod support;

use std::time::{Duration, Instant};

use redisson_lock::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis_url().await?;
    let client = Client::connect(&url).await?;
    let slots = client.get_permit_expirable_semaphore("example:slots");
    slots.delete().await?;
    assert!(slots.try_set_permits(1).await?);

    // A holder that "crashes": it never releases its 500 ms permit.
    let lost = slots
        .with_lease(Duration::from_millis(500))
        .acquire()
        .await?;
    println!("permit {lost} taken for 500 ms and never released");

    // The next worker waits; the permit comes back when its lease ends.
    let start = Instant::now();
    let id = slots
        .with_lease(Duration::from_secs(30))
        .try_acquire_for(Duration::from_secs(10))
        .await?
        .ok_or("no permit within 10 s")?;
    println!(
        "permit {id} taken after {:?} (the lease ran out)",
        start.elapsed()
    );

    // Extend the lease while working, then release by id.
    assert!(
        slots
            .update_lease_time(&id, Some(Duration::from_secs(60)))
            .await?
    );
    slots.release(&id).await?;
    // Releasing the expired one is refused: it is no longer held.
    assert!(slots.release(&lost).await.is_err());
    println!(
        "done: {} permit available",
        slots.available_permits().await?
    );
    slots.delete().await?;
    Ok(())
}
