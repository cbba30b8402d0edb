//! One registry, the tool definitions in every format a model API takes:
//! OpenAI (plain and strict), Anthropic, Gemini and MCP.
//!
//! ```text
//! cargo run --example tool_formats
//! ```

use idem::prelude::*;

struct Catalogue;

/// Search the product catalogue by free text.
#[read_tool]
async fn search(
    /// Words to look for.
    query: String,
    /// At most this many hits (default 10).
    limit: Option<u32>,
    _ctx: &Ctx<Catalogue>,
) -> Result<Vec<String>, String> {
    Ok(vec![query; limit.unwrap_or(1) as usize])
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct ChargeArgs {
    /// Amount in minor units (cents).
    amount: u64,
    /// ISO currency code, e.g. "eur".
    currency: String,
    customer_id: String,
}

/// Charge a customer's card. Safe to retry: duplicates are replayed.
#[write_tool(destructive = false, open_world = true)]
async fn charge_card(#[args] a: ChargeArgs, ctx: &WriteCtx<Catalogue>) -> Result<String, String> {
    Ok(format!(
        "charged {} {} under {}",
        a.amount,
        a.currency,
        ctx.idem_key()
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = Registry::builder(Catalogue)
        .tool(search)
        .tool(charge_card)
        .build()?;
    let show = |title: &str, value: serde_json::Value| -> Result<(), serde_json::Error> {
        println!("── {title}\n{}\n", serde_json::to_string_pretty(&value)?);
        Ok(())
    };
    show(
        "OpenAI (Chat Completions `tools`)",
        registry.tools(Provider::OpenAiChat)?,
    )?;
    show(
        "OpenAI, strict mode",
        registry.tools(Provider::OpenAiChatStrict)?,
    )?;
    show(
        "Anthropic (Messages `tools`)",
        registry.tools(Provider::Anthropic)?,
    )?;
    show("Gemini (`tools`)", registry.tools(Provider::Gemini)?)?;
    show(
        "Gemini with `parametersJsonSchema`",
        registry.tools(Provider::GeminiJsonSchema)?,
    )?;
    show("MCP (`tools/list`)", registry.tools(Provider::Mcp)?)?;
    Ok(())
}
