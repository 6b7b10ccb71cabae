/**
 * @rx/store-pg: the rx event log in Postgres, shared by runners in many processes on many hosts
 * (row-locked appends, leases tied to database sessions, `changes` through LISTEN/NOTIFY,
 * migrations through @effect/sql), as a `StateStore` Layer.
 */
export * as Config from "./Config.js"
export * as Migrations from "./Migrations.js"
export * as PgStore from "./PgStore.js"
