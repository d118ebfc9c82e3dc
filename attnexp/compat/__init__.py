"""Where attnexp reaches into third-party internals: one module per library, each use a function,
each checked by a test that fails loudly when an upgrade changes what it relies on."""
