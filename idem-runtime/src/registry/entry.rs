//! A registered tool behind one object-safe face, whatever its kind and
//! types: how the builder prepares it (checking its settings and resolving
//! them against the registry's defaults, once) and how the registry then
//! calls and identifies it.

use std::marker::PhantomData;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::checks::{check_info, check_settings};
use crate::engine::{self, CallOrigin, Defaults, Learnt, Shared, ToolSettings};
use crate::error::{RegistryError, ToolError};
use crate::key::{Fingerprint, IdemKey};
use crate::schema;
use crate::store::BoxFuture;
use crate::store::contract::boxed;
use crate::tool::{ReadTool, ToolDef, ToolInfo, ToolKind, WriteOptions, WriteTool};

/// A write tool's terms for a person's decision on one of its records.
#[derive(Debug, Clone, Copy)]
pub(super) struct Terms {
    /// How long a resolution or a refusal is kept: the tool's TTL.
    pub(super) ttl: Duration,
    /// The largest result a resolution may record.
    pub(super) max_result_bytes: usize,
    /// How long an approval stays good.
    pub(super) approval_window: Duration,
}

/// A tool as given to the builder, its settings not yet checked.
pub(super) trait UnpreparedTool<S>: Send + Sync {
    /// Checks the tool and its settings, resolves them against the
    /// registry's `defaults`, and returns its definition and the tool as
    /// the registry calls it.
    fn prepare(
        self: Box<Self>,
        defaults: &Defaults,
    ) -> Result<(ToolDef, Box<dyn ErasedTool<S>>), RegistryError>;
}

/// A tool behind a uniform, object-safe face, prepared: its settings
/// resolved once, when the registry was built.
pub(super) trait ErasedTool<S>: Send + Sync {
    fn call<'a>(
        &'a self,
        shared: &'a Shared<S>,
        caller: CallOrigin<'a>,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;

    /// For a write tool, the terms on which a person's decision on one of
    /// its records is written (an operator's resolution, an approval, a
    /// refusal). `None` for read tools.
    fn decision_terms(&self) -> Option<Terms>;

    /// Whether `result` fits the tool's result type (what a replay checks).
    fn fits_output(&self, result: &Value) -> Result<(), String>;

    /// The key and fingerprint a call would use; `None` for read tools.
    fn identify(
        &self,
        shared: &Shared<S>,
        caller: CallOrigin<'_>,
        args: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError>;

    /// Whether the tool's operations wait for a person's approval (`Never`
    /// for read tools): what the MCP server asks its clients about.
    #[cfg(feature = "mcp")]
    fn approval(&self) -> crate::tool::Approval;

    /// Replaces the tool's hidden fields in `args`, for a person's view.
    fn hide(&self, args: &mut Value);
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
    pub(super) _state: PhantomData<fn() -> S>,
}

/// A write tool as the registry calls it.
struct PreparedWrite<S, T> {
    tool: T,
    info: ToolInfo,
    /// Its options with the registry's defaults filled in, checked.
    settings: ToolSettings,
    /// What `prepare` learnt from the schema: sets, checked fields.
    learnt: Learnt,
    _state: PhantomData<fn() -> S>,
}

impl<S: Send + Sync + 'static, T: ReadTool<S>> UnpreparedTool<S> for RegisteredRead<S, T> {
    fn prepare(
        self: Box<Self>,
        _: &Defaults,
    ) -> Result<(ToolDef, Box<dyn ErasedTool<S>>), RegistryError> {
        check_info(&self.info)?;
        let def = ToolDef {
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
        };
        Ok((def, self))
    }
}

impl<S: Send + Sync + 'static, T: ReadTool<S>> ErasedTool<S> for RegisteredRead<S, T> {
    fn call<'a>(
        &'a self,
        shared: &'a Shared<S>,
        caller: CallOrigin<'a>,
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

    fn decision_terms(&self) -> Option<Terms> {
        None
    }

    fn fits_output(&self, _: &Value) -> Result<(), String> {
        Err("a read tool records nothing".to_owned())
    }

    fn identify(
        &self,
        _: &Shared<S>,
        _: CallOrigin<'_>,
        _: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError> {
        Ok(None)
    }

    #[cfg(feature = "mcp")]
    fn approval(&self) -> crate::tool::Approval {
        crate::tool::Approval::Never
    }

    fn hide(&self, _: &mut Value) {}
}

impl<S: Send + Sync + 'static, T: WriteTool<S>> UnpreparedTool<S> for RegisteredWrite<S, T> {
    fn prepare(
        self: Box<Self>,
        defaults: &Defaults,
    ) -> Result<(ToolDef, Box<dyn ErasedTool<S>>), RegistryError> {
        check_info(&self.info)?;
        let name = &self.info.name;
        let settings = ToolSettings::of(&self.options, defaults);
        check_settings(name, &settings)?;
        let given = self.info.input_schema.as_ref();
        let input_schema = schema::tool_input_schema::<T::Args>(name, given, true)?;
        settings.roles.validate(name, &input_schema)?;
        let mut learnt = Learnt::of(&input_schema, &settings.roles, given.is_some());
        learnt.output_schema = self.info.output_schema.clone();
        let def = ToolDef {
            name: name.to_string(),
            description: self.info.description.to_string(),
            kind: ToolKind::Write,
            input_schema,
            scope: Some(settings.scope),
            destructive: self.options.destructive,
            open_world: self.options.open_world,
            output_schema: self.info.output_schema.clone(),
        };
        let RegisteredWrite { tool, info, .. } = *self;
        let prepared = PreparedWrite {
            tool,
            info,
            settings,
            learnt,
            _state: PhantomData,
        };
        Ok((def, Box::new(prepared)))
    }
}

impl<S: Send + Sync + 'static, T: WriteTool<S>> ErasedTool<S> for PreparedWrite<S, T> {
    fn call<'a>(
        &'a self,
        shared: &'a Shared<S>,
        caller: CallOrigin<'a>,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        let (tool, name, settings, learnt) =
            (&self.tool, &self.info.name, &self.settings, &self.learnt);
        if engine::may_wait(settings, caller) {
            boxed!(engine::call_write_waiting(
                tool, name, settings, learnt, shared, caller, args,
            ))
        } else {
            boxed!(engine::call_write(
                tool, name, settings, learnt, shared, caller, args,
            ))
        }
    }

    fn decision_terms(&self) -> Option<Terms> {
        Some(Terms {
            ttl: self.settings.ttl,
            max_result_bytes: self.settings.max_result_bytes,
            approval_window: self.settings.approval_window,
        })
    }

    fn fits_output(&self, result: &Value) -> Result<(), String> {
        T::Output::deserialize(result)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn identify(
        &self,
        shared: &Shared<S>,
        caller: CallOrigin<'_>,
        args: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError> {
        let operation = engine::operation::<S, T>(
            &self.info.name,
            &self.settings,
            &self.learnt,
            shared.namespace.as_deref(),
            caller,
            args,
        )?;
        Ok(Some((operation.key, operation.checked.fingerprint)))
    }

    #[cfg(feature = "mcp")]
    fn approval(&self) -> crate::tool::Approval {
        self.settings.approval
    }

    fn hide(&self, args: &mut Value) {
        self.settings.roles.hide(args);
    }
}
