use idem::prelude::*;

/// Send the mail.
#[write_tool]
async fn send_mail(to: String, ctx: &WriteCtx) {
    let _ = (to, ctx);
}

fn main() {}
