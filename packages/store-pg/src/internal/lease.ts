/**
 * Goals' leases: a row per held lease in `rx_leases`, naming the database session that holds it
 * and expiring by the database's clock unless renewed. A lease is live while both hold: it has
 * not expired, and its session still exists (`pg_stat_activity`). So a holder whose process died
 * loses it as soon as Postgres sees the connection close, and one that hangs or is cut off loses
 * it `ttl` after its last renewal. Every lease of a store is held through one session of its own
 * (its "presence"), replaced when its connection is lost.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, ExecutionStrategy, Exit, Scope } from "effect"
import * as os from "node:os"
import { isConnectionLoss } from "./errors.js"
import { reserve } from "./sql.js"

/** How this process names itself as a holder. */
export const holder = (): string => `pid ${process.pid} on host ${os.hostname()}`

let taken = 0
/** A token unique to one lease: host, pid, this process's start and a counter. */
export const newToken = (): string => `${os.hostname()}:${process.pid}:${Math.round(performance.timeOrigin)}:${++taken}`

/** A lease row that is live: not expired, and its session still connected. */
const live = "l.expires_at > clock_timestamp() AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.session_pid)"

/**
 * Take the lease: insert the row, or take over one that is not live. Returns the token when
 * taken; nothing when a live holder has it. Runs on the presence session (`pg_backend_pid()`).
 */
export const acquireSql = `INSERT INTO rx_leases AS l (goal_id, holder, token, session_pid, acquired_at, expires_at)
VALUES ($1, $2, $3, pg_backend_pid(), clock_timestamp(), clock_timestamp() + $4::float8 * interval '1 millisecond')
ON CONFLICT (goal_id) DO UPDATE SET holder = excluded.holder, token = excluded.token, session_pid = excluded.session_pid,
  acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
WHERE NOT (${live})
RETURNING l.token`

/** Extend our lease (and name the current presence session); no row means it was taken over. */
export const renewSql = `UPDATE rx_leases SET expires_at = clock_timestamp() + $3::float8 * interval '1 millisecond', session_pid = pg_backend_pid()
WHERE goal_id = $1 AND token = $2
RETURNING token`

/** Give the lease up (only ours: a taker's row stays). */
export const releaseSql = "DELETE FROM rx_leases WHERE goal_id = $1 AND token = $2"

/** The live holder of a goal's lease, described. */
export const holderSql = `SELECT l.holder, to_char(l.acquired_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS since
FROM rx_leases l WHERE l.goal_id = $1 AND ${live}`

export interface Presence {
  /**
   * A statement on the presence session, one at a time (so an interrupted caller never cancels
   * another's statement). A lost connection is replaced at the next use; its leases stop being
   * live until their next renewal names the new session.
   */
  readonly execute: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
}

/** The presence session of a store: a connection of the pool, taken at first use, kept until the scope closes. */
export const makePresence = (sql: SqlClient.SqlClient): Effect.Effect<Presence, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const lock = yield* Effect.makeSemaphore(1)
    let current: { readonly conn: Connection; readonly scope: Scope.CloseableScope } | undefined

    const connect = Effect.suspend(() => {
      if (current !== undefined) return Effect.succeed(current)
      return Effect.gen(function*() {
        const child = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        const conn = yield* Scope.extend(reserve(sql), child).pipe(Effect.onError(() => Scope.close(child, Exit.void)))
        current = { conn, scope: child }
        return current
      })
    })

    const drop = (held: { readonly scope: Scope.CloseableScope }) =>
      Effect.suspend(() => {
        if (current !== held) return Effect.void
        current = undefined
        return Scope.close(held.scope, Exit.void)
      })

    const execute: Presence["execute"] = (text, params) =>
      lock.withPermits(1)(Effect.uninterruptible(Effect.flatMap(connect, (held) =>
        held.conn.execute(text, params, undefined).pipe(
          Effect.tapError((error) => (isConnectionLoss(error) ? drop(held) : Effect.void))
        ))))

    return { execute }
  })
