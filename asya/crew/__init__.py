"""Built-in end actors: `happy-end` records successes, `error-end` records failures."""
