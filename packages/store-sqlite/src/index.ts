/**
 * @rx/store-sqlite: the rx event log in a SQLite file (WAL, `BEGIN IMMEDIATE`, migrations,
 * snapshots), as a `StateStore` Layer; `Doctor` checks a database's health.
 */
export * as Config from "./Config.js"
export * as Doctor from "./Doctor.js"
export * as Migrations from "./Migrations.js"
export * as SqliteStore from "./SqliteStore.js"
