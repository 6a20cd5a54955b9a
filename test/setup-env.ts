// Quiet logs in tests unless asked for.
process.env.LOG_LEVEL ??= 'silent';
