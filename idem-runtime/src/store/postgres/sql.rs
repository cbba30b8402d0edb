//! The SQL of [`PostgresStore`](super::PostgresStore), each statement in a
//! file of its own under `sql/`, named by what it does; `{table}` stands for
//! the (checked, qualified) table name. Each file says what its parameters
//! are.

/// The statements, for one table.
pub(super) struct Sql {
    pub(super) claim: String,
    pub(super) read: String,
    pub(super) settle: String,
    pub(super) renew: String,
    pub(super) purge: String,
    pub(super) count_expired: String,
    pub(super) inspect: String,
    pub(super) scan: String,
}

impl Sql {
    pub(super) fn new(table: &str) -> Sql {
        let load = |sql: &str| sql.replace("{table}", table);
        Sql {
            claim: load(include_str!("sql/claim.sql")),
            read: load(include_str!("sql/read.sql")),
            settle: load(include_str!("sql/settle.sql")),
            renew: load(include_str!("sql/renew.sql")),
            purge: load(include_str!("sql/purge.sql")),
            count_expired: load(include_str!("sql/count_expired.sql")),
            inspect: load(include_str!("sql/inspect.sql")),
            scan: load(include_str!("sql/scan.sql")),
        }
    }
}

/// The SQL creating `table` (qualified), its index `index` and its
/// version table at schema version `version`.
pub(super) fn schema(table: &str, index: &str, version: i32) -> String {
    include_str!("sql/schema.sql")
        .replace("{table}", table)
        .replace("{index}", index)
        .replace("{version}", &version.to_string())
}
