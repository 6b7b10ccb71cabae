/** Who holds a goal's lease, and whether that holder still runs. */
import { Either, GlobalValue, Schema } from "effect"
import * as os from "node:os"
import { StateStore } from "@rx/kernel"

/** This host, as leases name it: a holder on the same host is checked by its pid. */
export const thisHost = os.hostname()

/**
 * The leases held by stores in this process (shared by every store instance and copy of this
 * module): a lease row with this process's pid is live only while its token is here.
 */
export const processLeases = GlobalValue.globalValue(Symbol.for("@rx/store-sqlite/SqliteStore/leases"), () => ({
  tokens: new Set<string>(),
  taken: 0
}))

/** A token unique to one lease: this process's pid and start time, and a counter. */
export const newToken = (): string => `${process.pid}.${Math.round(performance.timeOrigin)}.${++processLeases.taken}`

export const Holder = Schema.Struct({
  host: Schema.String,
  pid: Schema.Int,
  token: Schema.String,
  acquired_at: Schema.Finite,
  heartbeat_at: Schema.Finite
})
export type Holder = typeof Holder.Type
const decodeHolderEither = Schema.decodeUnknownEither(Holder)

/** A `leases` row; one that does not decode is an error, never taken over silently. */
export const decodeHolder = (goalId: string, row: unknown): Either.Either<Holder, StateStore.StoreError> =>
  Either.mapLeft(decodeHolderEither(row), (error) =>
    new StateStore.StoreError({
      message: `the leases row of goal ${goalId} does not decode: ${error.message}. If no runner runs the goal, delete the row (DELETE FROM leases WHERE goal_id = '${goalId}')`,
      goalId
    }))

/**
 * Whether a lease's holder still runs. On this host: its process exists (and, if it is this
 * process, still holds the lease). On another host: its heartbeat is recent.
 */
export const isAlive = (holder: Holder, now: number, timeoutMs: number): boolean => {
  if (holder.host !== thisHost) return now - holder.heartbeat_at < timeoutMs
  if (holder.pid === process.pid) return processLeases.tokens.has(holder.token)
  return processExists(holder.pid)
}

/**
 * Whether a lease's holder runs the goal now, for readers: alive as `isAlive` says and, on any
 * host, its heartbeat younger than `timeoutMs`, so a holder that hangs, or whose pid a new
 * process took after it was killed, stops counting once its heartbeats stop.
 */
export const isRunning = (holder: Holder, now: number, timeoutMs: number): boolean =>
  isAlive(holder, now, timeoutMs) && now - holder.heartbeat_at < timeoutMs

/** `kill(pid, 0)`: no such process (ESRCH) is dead; not ours to signal (EPERM) is alive. */
export const processExists = (pid: number): boolean => {
  // 0 and negative pids would name process groups.
  if (pid <= 0) return false
  return Either.match(Either.try(() => process.kill(pid, 0)), {
    onLeft: (error) => typeof error === "object" && error !== null && "code" in error && error.code === "EPERM",
    onRight: () => true
  })
}

export const isoTime = (ms: number): string => {
  const date = new Date(ms)
  return Number.isNaN(date.getTime()) ? String(ms) : date.toISOString()
}

/** Who holds a lease, for `LeaseHeld`: "pid 1234 on host h, since <time>". */
export const describeHolder = (holder: Holder): string =>
  holder.host === thisHost && holder.pid === process.pid
    ? `another runner in this process (pid ${holder.pid} on host ${holder.host}), since ${isoTime(holder.acquired_at)}`
    : `pid ${holder.pid} on host ${holder.host}, since ${isoTime(holder.acquired_at)}${
      holder.host === thisHost ? "" : `, last heartbeat ${isoTime(holder.heartbeat_at)}`
    }`

