"""``ray._private`` / ``ray._common`` under the rayreact alias: packages of shims."""
