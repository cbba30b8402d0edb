//! A registered tool behind one object-safe face, whatever its kind and
//! types: how the registry prepares, calls and identifies it.

use std::marker::PhantomData;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

use super::checks::{check_info, check_settings};
use crate::engine::{self, Caller, Defaults, Learnt, Resolved, Shared};
use crate::error::{RegistryError, ToolError};
use crate::key::{Fingerprint, IdemKey};
use crate::schema;
use crate::store::BoxFuture;
use crate::tool::{ReadTool, ToolDef, ToolInfo, ToolKind, WriteOptions, WriteTool};

/// A tool behind a uniform, object-safe face.
pub(super) trait ErasedTool<S>: Send + Sync {
    /// Validates the tool and its settings and returns its definition.
    fn prepare(&self, defaults: &Defaults) -> Result<ToolDef, RegistryError>;

    fn call<'a>(
        &'a self,
        shared: &'a Shared<S>,
        caller: Caller<'a>,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;

    /// For a write tool, how an operator's resolution of one of its
    /// records is written: how long it is kept, and the largest result
    /// recorded. `None` for read tools.
    fn resolution_terms(&self, defaults: &Defaults) -> Option<(std::time::Duration, usize)>;

    /// Whether `result` fits the tool's result type (what a replay checks).
    fn fits_output(&self, result: &Value) -> Result<(), String>;

    /// The key and fingerprint a call would use; `None` for read tools.
    fn identify(
        &self,
        shared: &Shared<S>,
        caller: Caller<'_>,
        args: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError>;
}

pub(super) struct RegisteredRead<S, T> {
    pub(super) tool: T,
    pub(super) info: ToolInfo,
    pub(super) _state: PhantomData<fn() -> S>,
}

pub(super) struct RegisteredWrite<S, T> {
    pub(super) tool: T,
    pub(super) info: ToolInfo,
    pub(super) options: WriteOptions,
    /// What `prepare` learns from the schema: sets, checked fields.
    pub(super) learnt: OnceLock<Learnt>,
    pub(super) _state: PhantomData<fn() -> S>,
}

impl<S, T> RegisteredWrite<S, T> {
    fn learnt(&self) -> Option<&Learnt> {
        self.learnt.get()
    }
}

impl<S: Send + Sync + 'static, T: ReadTool<S>> ErasedTool<S> for RegisteredRead<S, T> {
    fn prepare(&self, _: &Defaults) -> Result<ToolDef, RegistryError> {
        check_info(&self.info)?;
        Ok(ToolDef {
            name: self.info.name.to_string(),
            description: self.info.description.to_string(),
            kind: ToolKind::Read,
            input_schema: schema::tool_input_schema::<T::Args>(
                &self.info.name,
                self.info.input_schema.as_ref(),
                false,
            )?,
            scope: None,
            destructive: false,
            open_world: false,
            output_schema: self.info.output_schema.clone(),
        })
    }

    fn call<'a>(
        &'a self,
        shared: &'a Shared<S>,
        caller: Caller<'a>,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(engine::call_read(
            &self.tool,
            &self.info.name,
            shared,
            caller,
            args,
        ))
    }

    fn resolution_terms(&self, _: &Defaults) -> Option<(std::time::Duration, usize)> {
        None
    }

    fn fits_output(&self, _: &Value) -> Result<(), String> {
        Err("a read tool records nothing".to_owned())
    }

    fn identify(
        &self,
        _: &Shared<S>,
        _: Caller<'_>,
        _: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError> {
        Ok(None)
    }
}

impl<S: Send + Sync + 'static, T: WriteTool<S>> ErasedTool<S> for RegisteredWrite<S, T> {
    fn prepare(&self, defaults: &Defaults) -> Result<ToolDef, RegistryError> {
        check_info(&self.info)?;
        let name = &self.info.name;
        let cfg = Resolved::new(&self.options, defaults);
        check_settings(
            name,
            cfg.lease,
            cfg.ttl,
            cfg.max_hold,
            cfg.on_in_flight,
            cfg.max_result_bytes,
        )?;
        let given = self.info.input_schema.as_ref();
        let input_schema = schema::tool_input_schema::<T::Args>(name, given, true)?;
        cfg.roles.validate(name, &input_schema)?;
        let learnt = Learnt::of(&input_schema, &cfg.roles, given.is_some());
        let _ = self.learnt.set(learnt);
        Ok(ToolDef {
            name: name.to_string(),
            description: self.info.description.to_string(),
            kind: ToolKind::Write,
            input_schema,
            scope: Some(cfg.scope),
            destructive: self.options.destructive,
            open_world: self.options.open_world,
            output_schema: self.info.output_schema.clone(),
        })
    }

    fn call<'a>(
        &'a self,
        shared: &'a Shared<S>,
        caller: Caller<'a>,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let cfg = Resolved::new(&self.options, &shared.defaults);
            let (tool, name, learnt) = (&self.tool, &self.info.name, self.learnt());
            engine::call_write(tool, name, &cfg, learnt, shared, caller, args).await
        })
    }

    fn resolution_terms(&self, defaults: &Defaults) -> Option<(std::time::Duration, usize)> {
        let cfg = Resolved::new(&self.options, defaults);
        Some((cfg.ttl, cfg.max_result_bytes))
    }

    fn fits_output(&self, result: &Value) -> Result<(), String> {
        T::Output::deserialize(result)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn identify(
        &self,
        shared: &Shared<S>,
        caller: Caller<'_>,
        args: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError> {
        let cfg = Resolved::new(&self.options, &shared.defaults);
        let (_, key, checked) = engine::operation::<S, T>(
            &self.info.name,
            &cfg,
            self.learnt(),
            shared.namespace.as_deref(),
            caller,
            args,
        )?;
        Ok(Some((key, checked.fingerprint)))
    }
}
