/** Turn SQLite failures into `StoreError`s a user can act on; the refusal to open a file. */
import { Schema } from "effect"
import { Causes, StateStore } from "@rx/kernel"

/**
 * A file rx will not use as its log, and why: it does not exist (and may not be created), is
 * empty (0 bytes), is not SQLite, is another program's SQLite database, has a schema newer than
 * this rx or one only a writable open migrates, or is damaged (SQLite's checks fail or rx's
 * tables are missing). The file is left untouched.
 */
export class DatabaseRefused extends Schema.TaggedError<DatabaseRefused>()("@rx/store-sqlite/DatabaseRefused", {
  filename: Schema.String,
  reason: Schema.Literal("missing", "empty", "not-sqlite", "foreign", "newer", "outdated", "damaged"),
  message: Schema.String
}) {}

/** The SQLite result code of a failure (`SQLITE_FULL`, ...), looking through wrappers. */
export const codeOf = (error: unknown): string | undefined =>
  Causes.firstCode(error, { max: 4, accept: (code) => code.startsWith("SQLITE") })

/** The innermost message of a failure. */
const detailOf = (error: unknown): string => Causes.innermostMessage(error, 4)

export interface Where {
  readonly filename: string
  readonly busyTimeoutMs: number
  /** What was being done: "append to goal g1", "open", ... */
  readonly what: string
  readonly goalId?: string | undefined
  readonly seq?: number | undefined
}

/** A `StoreError` for a SQLite failure, saying what happened and what to do about it. */
export const toStoreError = (where: Where, error: unknown): StateStore.StoreError => {
  const code = codeOf(error) ?? ""
  const detail = detailOf(error)
  const { filename, what } = where
  // What to do once the cause is fixed: a goal that has a log goes on with resume; one whose first event was not recorded starts again.
  const then = where.goalId === undefined ? "then try again" : where.seq === 0 ? `then run it again (nothing of goal ${where.goalId} was recorded)` : "then resume the goal"
  const message = code === "SQLITE_FULL"
    ? `${what} failed: the disk is full (${filename}: ${detail}); nothing of this write was recorded. Free some space, ${then}`
    : code.startsWith("SQLITE_READONLY")
    ? `${what} failed: the database ${filename} is read-only (${detail}); nothing was recorded. This user can read it but not write it: make the file and its folder writable, or copy the log (with its -wal file, if any) to a folder you can write and use the copy, ${then}`
    : code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")
    ? `${what} failed: ${filename} is locked by another process (waited ${where.busyTimeoutMs} ms: ${detail}); try again once it is done, or raise busyTimeoutMs`
    : code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB"
    ? `${what} failed: ${filename} is corrupt or not a SQLite database (${detail}); rx never overwrites it: restore it from a backup or choose another file`
    : code.startsWith("SQLITE_IOERR")
    ? `${what} failed: I/O error on ${filename} (${code}: ${detail}); check the disk, ${then}`
    : code.startsWith("SQLITE_CANTOPEN")
    ? `${what} failed: cannot open ${filename} (${detail}); check that its directory exists and is writable`
    : `${what} failed on ${filename}: ${code === "" ? "" : `${code}: `}${detail}`
  return new StateStore.StoreError({
    message,
    ...(where.goalId === undefined ? {} : { goalId: where.goalId }),
    ...(where.seq === undefined ? {} : { seq: where.seq })
  })
}
