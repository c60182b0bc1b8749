//! The per-node failure report of a MultiLock or RedLock.

use std::fmt;

use crate::error::LockError;

/// Which multi-lock operation a [`QuorumError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuorumOperation {
    /// Acquiring: too many members failed with an error for the quorum to be reachable.
    Acquire,
    /// Releasing: some members could not be released (the others were).
    Unlock,
}

/// A [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock) operation that failed on
/// too many nodes, with the reason of each failed node: [`LockError::Quorum`].
///
/// Nodes are numbered by their position in the list given to
/// [`MultiLock::new`](crate::MultiLock::new).
///
/// # Examples
///
/// ```no_run
/// # async fn f(redlock: redisson_lock::RedLock) {
/// match redlock.try_lock().await {
///     Ok(Some(guard)) => drop(guard),
///     Ok(None) => println!("held by someone else"),
///     Err(redisson_lock::LockError::Quorum(q)) => {
///         for (node, error) in &q.errors {
///             eprintln!("node {node}: {error}");
///         }
///     }
///     Err(e) => eprintln!("{e}"),
/// }
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct QuorumError {
    /// What was being done.
    pub operation: QuorumOperation,
    /// Nodes on which it succeeded: member locks taken (acquire) or released (unlock).
    pub acquired: usize,
    /// How many had to succeed: the quorum (acquire) or every held member (unlock).
    pub required: usize,
    /// The nodes that failed with an error, by position, with the error.
    pub errors: Vec<(usize, LockError)>,
}

impl QuorumError {
    pub(crate) fn new(
        operation: QuorumOperation,
        acquired: usize,
        required: usize,
        mut errors: Vec<(usize, LockError)>,
    ) -> Self {
        errors.sort_by_key(|(i, _)| *i);
        QuorumError {
            operation,
            acquired,
            required,
            errors,
        }
    }
}

impl fmt::Display for QuorumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.operation {
            QuorumOperation::Acquire => write!(
                f,
                "lock quorum not reached: {} of {} required locks taken",
                self.acquired, self.required
            )?,
            QuorumOperation::Unlock => write!(
                f,
                "unlock failed on {} of {} nodes",
                self.required.saturating_sub(self.acquired),
                self.required
            )?,
        }
        for (node, e) in &self.errors {
            write!(f, "; node {node}: {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for QuorumError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.errors
            .first()
            .map(|(_, e)| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_lists_nodes_in_order() {
        let e = QuorumError::new(
            QuorumOperation::Acquire,
            1,
            2,
            vec![
                (2, LockError::InvalidArgument("b")),
                (0, LockError::InvalidArgument("a")),
            ],
        );
        assert_eq!(
            e.to_string(),
            "lock quorum not reached: 1 of 2 required locks taken; \
             node 0: invalid argument: a; node 2: invalid argument: b"
        );
        let u = QuorumError::new(QuorumOperation::Unlock, 2, 3, vec![]);
        assert_eq!(u.to_string(), "unlock failed on 1 of 3 nodes");
    }
}
