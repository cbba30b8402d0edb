//! The SQL of [`SqliteStore`](super::SqliteStore), each statement in a file
//! of its own under `sql/`, named by what it does. Parameters are
//! positional (`?1`..); each file says what they are.

/// Creates the table and its index (schema version 3).
pub(super) const SCHEMA: &str = include_str!("sql/schema.sql");
/// Brings a table of schema version 1 to version 2.
pub(super) const MIGRATE_1_TO_2: &str = include_str!("sql/migrate_1_to_2.sql");
/// Brings a table of schema version 2 to version 3.
pub(super) const MIGRATE_2_TO_3: &str = include_str!("sql/migrate_2_to_3.sql");
/// Reads a record: state, fingerprint, attempt, lease_until, payload, expires_at.
pub(super) const READ: &str = include_str!("sql/read.sql");
/// Writes the running record of a claim.
pub(super) const CLAIM: &str = include_str!("sql/claim.sql");
/// Deletes a few expired records beside a claim.
pub(super) const SWEEP: &str = include_str!("sql/sweep.sql");
/// Deletes every expired record.
pub(super) const PURGE: &str = include_str!("sql/purge.sql");
/// Extends the holder's lease.
pub(super) const RENEW: &str = include_str!("sql/renew.sql");
/// Records an outcome (done, failed) or releases, on the holder's token.
pub(super) const SETTLE: &str = include_str!("sql/settle.sql");
/// Reads a record for an operator.
pub(super) const INSPECT: &str = include_str!("sql/inspect.sql");
/// Reads a page of records for an operator.
pub(super) const SCAN: &str = include_str!("sql/scan.sql");
/// Counts the expired records.
pub(super) const COUNT_EXPIRED: &str = include_str!("sql/count_expired.sql");
