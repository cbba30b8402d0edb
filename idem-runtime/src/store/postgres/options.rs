//! [`PostgresOptions`]: how a [`PostgresStore`](super::PostgresStore)
//! connects and where it keeps its table.

use std::time::Duration;

use crate::error::StoreError;

/// How [`PostgresStore`](super::PostgresStore) connects and where it keeps its table.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PostgresOptions {
    pub(crate) schema: Option<String>,
    pub(crate) table: String,
    pub(crate) pool_size: u32,
    pub(crate) connect_timeout: Duration,
    pub(crate) create_schema: bool,
    pub(crate) purge_interval: Option<Duration>,
    #[cfg(feature = "postgres-tls")]
    pub(crate) tls_root_ca: Option<Vec<u8>>,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: None,
            table: "idem_records".to_owned(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(1),
            create_schema: true,
            purge_interval: Some(Duration::from_secs(60)),
            #[cfg(feature = "postgres-tls")]
            tls_root_ca: None,
        }
    }
}

impl PostgresOptions {
    /// The defaults.
    pub fn new() -> PostgresOptions {
        PostgresOptions::default()
    }

    /// The schema of the table; `None` for the connection's `search_path`.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// The table: `idem_records`. Its version lives in `<table>_schema`.
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// Connections in the pool: 16.
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size;
        self
    }

    /// Bound on getting a connection (connecting included): 1 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Create the table when missing (the default); when off, run
    /// [`PostgresStore::schema_sql`](super::PostgresStore::schema_sql) as a
    /// migration yourself.
    pub fn create_schema(mut self, create: bool) -> Self {
        self.create_schema = create;
        self
    }

    /// How often a background task deletes expired rows (1 min); `None` to
    /// leave it to
    /// [`IdemStore::purge_expired`](crate::IdemStore::purge_expired) on a
    /// schedule of your own. The task stops when the store is dropped.
    pub fn purge_interval(mut self, interval: Option<Duration>) -> Self {
        self.purge_interval = interval;
        self
    }

    /// trust the CA in this PEM.
    #[cfg(feature = "postgres-tls")]
    pub fn tls_root_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root_ca = Some(pem.into());
        self
    }

    /// The qualified table name, after checking both identifiers.
    pub(super) fn qualified(&self) -> Result<String, StoreError> {
        let check = |what: &str, id: &str| {
            let ok = !id.is_empty()
                && id.len() <= 55
                && id.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                && id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if ok {
                Ok(())
            } else {
                Err(StoreError::backend(format!(
                    "invalid {what} name {id:?}: use lowercase letters, digits and `_`, at most 55"
                )))
            }
        };
        check("table", &self.table)?;
        match &self.schema {
            Some(schema) => {
                check("schema", schema)?;
                Ok(format!("{schema}.{}", self.table))
            }
            None => Ok(self.table.clone()),
        }
    }
}
