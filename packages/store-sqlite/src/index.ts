/**
 * @rx/store-sqlite: the rx event log in a SQLite file (WAL, `BEGIN IMMEDIATE`, migrations,
 * snapshots), as a `StateStore` Layer.
 */
export * as Config from "./Config.js"
export * as Migrations from "./Migrations.js"
export * as SqliteStore from "./SqliteStore.js"
