//! Unit tests of the hold state machine (no Redis).
use super::*;
use std::future::Future;

const WD: u64 = 30_000;

/// A reentrant lock's hold on key `k`, field `f`.
fn plain_hold() -> Hold {
    Hold::new(
        "k".into(),
        "f".into(),
        Renewal::Hash,
        HoldKind {
            name: "lock",
            channel_prefix: "redisson_lock__channel",
            layout: crate::scripts::Layout::Plain,
            publishes: true,
        },
    )
}

/// A renewal instant reads back exactly as recorded, later ones replace it, and a new
/// hold counts as renewed when it was made.
#[test]
fn renewal_instants_read_back_exactly() {
    let before = Instant::now();
    let hold = plain_hold();
    assert!(hold.renewed_at() >= before && hold.renewed_at() <= Instant::now());
    let at = Instant::now() + Duration::from_nanos(123_456_789);
    hold.renewed(at);
    assert_eq!(hold.renewed_at(), at);
    let later = at + Duration::from_secs(3);
    hold.renewed(later);
    assert_eq!(hold.renewed_at(), later);
}

/// At risk is set once (the first `risk` reports the change and wakes waiters), stays set
/// until a confirmed renewal, and is set again by a later failure.
#[test]
fn at_risk_is_set_once_and_cleared_by_a_renewal() {
    let hold = plain_hold();
    assert!(!hold.is_at_risk());
    let woken = hold.changed();
    let mut woken = std::pin::pin!(woken);
    woken.as_mut().enable();
    assert!(hold.risk());
    assert!(hold.is_at_risk());
    let waker = futures_util::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(woken.as_mut().poll(&mut cx).is_ready(), "waiters not woken");
    assert!(!hold.risk(), "a second failure is not a new change");
    hold.renewed(Instant::now());
    assert!(!hold.is_at_risk());
    assert!(hold.risk());
}

fn fixed(now: Instant, ms: u64) -> Lease {
    Lease::Fixed {
        lease: Duration::from_millis(ms),
        deadline: now + Duration::from_millis(ms),
    }
}

#[test]
fn expiry_covers_every_outstanding_grant() {
    let now = Instant::now();
    let mut s = HoldState::default();
    assert_eq!(s.expiry_ms(now, WD, None), None);
    assert_eq!(s.expiry_ms(now, WD, Some(500)), Some(500));
    // Outer fixed 10 s: re-entering with 500 ms must not shorten the key.
    s.taken(fixed(now, 10_000));
    assert_eq!(s.expiry_ms(now, WD, Some(500)), Some(10_000));
    // A watchdog grant needs the watchdog lease.
    let wd = s.taken(Lease::Watchdog);
    assert_eq!(s.expiry_ms(now, WD, None), Some(WD));
    // Releasing the watchdog grant leaves the fixed one's remaining time, not 30 s.
    assert!(s.take_grant(wd).is_some());
    let later = now + Duration::from_millis(4_000);
    assert_eq!(s.expiry_ms(later, WD, None), Some(6_000));
    // Past every deadline: never 0 (PEXPIRE 0 deletes), 1 ms.
    assert_eq!(
        s.expiry_ms(now + Duration::from_secs(60), WD, None),
        Some(1)
    );
}

#[test]
fn expiry_rounds_up() {
    let now = Instant::now();
    let mut s = HoldState::default();
    s.taken(Lease::Fixed {
        lease: Duration::from_micros(1_500),
        deadline: now + Duration::from_micros(1_500),
    });
    assert_eq!(s.expiry_ms(now, WD, None), Some(2));
}

#[test]
fn owner_style_release_takes_the_latest_grant() {
    let now = Instant::now();
    let mut s = HoldState::default();
    let a = s.taken(fixed(now, 60_000));
    let b = s.taken(fixed(now, 5_000));
    assert_eq!(s.take_latest().map(|g| g.id), Some(b));
    assert_eq!(s.expiry_ms(now, WD, None), Some(60_000));
    // A guard whose grant was released owner-style finds nothing to release.
    assert_eq!(s.take_grant(b), None);
    let g = s.take_grant(a).unwrap();
    assert_eq!(s.count(), 0);
    s.restore(g);
    assert_eq!(s.count(), 1);
}

#[test]
fn restore_keeps_acquisition_order() {
    let now = Instant::now();
    let mut s = HoldState::default();
    let ids: Vec<_> = (0..4)
        .map(|i| s.taken(fixed(now, 1_000 * (i + 1))))
        .collect();
    let g = s.take_grant(ids[1]).unwrap();
    s.restore(g);
    assert_eq!(s.take_latest().map(|g| g.id), Some(ids[3]));
    assert_eq!(s.take_latest().map(|g| g.id), Some(ids[2]));
    assert_eq!(s.take_latest().map(|g| g.id), Some(ids[1]));
}

/// A small deterministic model check: random operation sequences keep the invariants.
#[test]
fn random_sequences_keep_the_invariants() {
    let now = Instant::now();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..200 {
        let mut s = HoldState::default();
        let mut model: Vec<(GrantId, Lease)> = Vec::new();
        for _ in 0..50 {
            match next() % 5 {
                0 | 1 => {
                    let lease = if next() % 2 == 0 {
                        Lease::Watchdog
                    } else {
                        fixed(now, next() % 100_000)
                    };
                    let id = s.taken(lease);
                    assert!(model.iter().all(|(m, _)| *m < id), "ids increase");
                    model.push((id, lease));
                }
                2 => {
                    let got = s.take_latest().map(|g| g.id);
                    assert_eq!(got, model.pop().map(|m| m.0));
                }
                3 if !model.is_empty() => {
                    let i = (next() as usize) % model.len();
                    let (id, _) = model.remove(i);
                    let g = s.take_grant(id).expect("outstanding grant");
                    if next() % 2 == 0 {
                        s.restore(g);
                        model.insert(i, (g.id, g.lease));
                    }
                }
                _ => {
                    s.clear(s.epoch + 1);
                    model.clear();
                }
            }
            assert_eq!(s.count() as usize, model.len());
            assert_eq!(
                s.watched(),
                model.iter().any(|(_, l)| *l == Lease::Watchdog)
            );
            let want = model
                .iter()
                .map(|(_, l)| match l {
                    Lease::Watchdog => WD,
                    Lease::Fixed { deadline, .. } => {
                        millis(deadline.saturating_duration_since(now))
                    }
                })
                .max()
                .map(|m| m.max(1));
            assert_eq!(s.expiry_ms(now, WD, None), want);
        }
    }
}
