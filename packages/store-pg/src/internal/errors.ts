/** Turn Postgres failures into `StoreError`s a user can act on; the refusal of a database. */
import { Schema } from "effect"
import { Causes, StateStore } from "@rx/kernel"
import { redact } from "../Config.js"

/**
 * A database rx will not use as its log, and why: it holds an rx schema newer than this rx
 * (`newer`), or rx's migrations table says a version whose tables are missing (`damaged`).
 * Nothing is written to it.
 */
export class DatabaseRefused extends Schema.TaggedError<DatabaseRefused>()("@rx/store-pg/DatabaseRefused", {
  database: Schema.String,
  reason: Schema.Literal("newer", "damaged"),
  message: Schema.String
}) {}

/** The SQLSTATE of a server error (`23505`, `08006`, ...), or a Node error code (`ECONNREFUSED`), through wrappers (SqlError wraps pg's error). */
export const codeOf = (error: unknown): string | undefined => Causes.firstCode(error, { max: 5 })

/** The innermost message of a failure. */
export const detailOf = (error: unknown): string => Causes.innermostMessage(error, 5)

/** Whether a failure means the connection itself is gone (not a statement's own error). */
export const isConnectionLoss = (error: unknown): boolean => {
  const code = codeOf(error)
  if (code === undefined) return true
  if (/^[0-9A-Z]{5}$/.test(code)) return code.startsWith("08") || code.startsWith("57P")
  return true
}

/** A unique violation: two writers raced to insert the same row. */
export const isUniqueViolation = (error: unknown): boolean => codeOf(error) === "23505"

export interface Where {
  /** The database, as `host:port/name`, never with the password. */
  readonly database: string
  /** What was being done: "appending to goal g1", "opening", ... */
  readonly what: string
  readonly goalId?: string | undefined
  readonly seq?: number | undefined
}

/** A `StoreError` for a Postgres failure, saying what happened and what to do about it. */
export const toStoreError = (where: Where, error: unknown): StateStore.StoreError => {
  const code = codeOf(error) ?? ""
  const detail = redact(detailOf(error))
  const { database, what } = where
  const then = where.goalId === undefined
    ? "then try again"
    : where.seq === 0
    ? `then run it again (nothing of goal ${where.goalId} was recorded)`
    : "then resume the goal"
  const message = code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EHOSTUNREACH" || code === "ETIMEDOUT"
    ? `${what} failed: cannot reach Postgres at ${database} (${code}: ${detail}); check that the server runs and the URL names it, ${then}`
    : code.startsWith("28")
    ? `${what} failed: Postgres at ${database} refused the login (${detail}); check the user and password in the URL`
    : code === "3D000"
    ? `${what} failed: ${detail} at ${database}; create it (CREATE DATABASE) or name an existing one in the URL`
    : code === "53300"
    ? `${what} failed: Postgres at ${database} has too many connections (${detail}); lower maxConnections or raise the server's max_connections, ${then}`
    : code.startsWith("53")
    ? `${what} failed: Postgres at ${database} is out of resources (${code}: ${detail}); nothing of this write was recorded. Free disk or memory on the server, ${then}`
    : code === "25006" || code === "42501"
    ? `${what} failed: Postgres at ${database} refused the write (${code}: ${detail}); nothing was recorded. Use a role that may write rx's tables, or a primary rather than a replica, ${then}`
    : code.startsWith("08") || code.startsWith("57P") || code === "" || code.startsWith("E")
    ? `${what} failed: the connection to Postgres at ${database} was lost (${code === "" ? "" : `${code}: `}${detail}); whether a write in flight was recorded is unknown, ${then}`
    : `${what} failed on ${database}: ${code}: ${detail}`
  return new StateStore.StoreError({
    message,
    ...(where.goalId === undefined ? {} : { goalId: where.goalId }),
    ...(where.seq === undefined ? {} : { seq: where.seq })
  })
}
