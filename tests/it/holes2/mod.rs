//! The second round of test holes: one module per area where a realistic bug, written against
//! the code of the time, passed every test. Each test names, in its doc comment, the kind of bug
//! it is there to catch, and its commit says which bug was planted to see it go red.

mod batch_recovery;
mod fair_head_leaves;
mod fenced_edges;
mod kind_matrix;
mod multi_channel_refusals;
mod replica_topology;
