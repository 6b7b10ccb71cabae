/**
 * Events to and from `rx_events` rows: the payload is the event's whole JSON encoding (its
 * Schema's, as `rx events` prints it), with the encoding version beside it, so an older rx's rows
 * are read through the kernel's upcasters.
 */
import { Effect, Either } from "effect"
import { Event, StateStore } from "@rx/kernel"
import { checksum } from "./checksum.js"

/** The columns `decodeRows` reads, in its order. */
export const eventColumns = "seq, version, payload, checksum"

/** A stored event that cannot be read: never skipped. */
export const corrupt = (goalId: string, seq: number, why: string): StateStore.StoreError =>
  new StateStore.StoreError({
    message: `goal ${goalId}, seq ${seq}: ${why}. rx never skips or repairs an event: restore the database from a backup`,
    goalId,
    seq
  })

/**
 * Why the row's payload is not what rx wrote, by its checksum; undefined when it matches, or the
 * row has none (written before the column existed).
 */
const checksumProblem = (payload: string, stored: unknown): string | undefined => {
  if (stored === null || stored === undefined) return undefined
  if (typeof stored !== "number") return `the row's checksum is not a number (${String(stored)})`
  const actual = checksum(payload)
  return actual === stored
    ? undefined
    : `its payload does not match the checksum rx stored with it (stored ${stored}, the payload gives ${actual}): its bytes changed after rx wrote them (a flipped bit on disk, or an edit by hand)`
}

/** One row (`seq, version, payload, checksum`) expected at `seq`, decoded; or why it cannot be read. */
const decodeRow = (goalId: string, seq: number, row: ReadonlyArray<unknown>): Either.Either<Event.Event, string> => {
  const [stored, version, payload, sum] = row
  if (stored !== seq) return Either.left(`the log has no event at this seq (the next stored one is ${String(stored)})`)
  if (typeof version !== "number" || typeof payload !== "string") return Either.left("the row has no version or payload")
  const changed = checksumProblem(payload, sum)
  if (changed !== undefined) return Either.left(changed)
  const decoded = Event.decodeJson(payload, version)
  if (Either.isLeft(decoded)) return Either.left(`the stored event (encoding version ${version}) does not decode: ${decoded.left}`)
  if (decoded.right.goalId !== goalId || decoded.right.seq !== seq) {
    return Either.left(`the stored event says goal ${decoded.right.goalId}, seq ${decoded.right.seq}`)
  }
  return decoded
}

/**
 * Rows decoded in order. With `fromSeq`, rows must be the seqs from it with no gap; without, any
 * ascending subset (a tag-filtered read). A bad row fails naming goal and seq.
 */
export const decodeRows = (
  goalId: string,
  fromSeq: number | undefined,
  rows: ReadonlyArray<ReadonlyArray<unknown>>
): Effect.Effect<ReadonlyArray<Event.Event>, StateStore.StoreError> => {
  const events: Array<Event.Event> = []
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] ?? []
    const expected = fromSeq === undefined ? (typeof row[0] === "number" ? row[0] : -1) : fromSeq + i
    const decoded = decodeRow(goalId, expected, row)
    if (Either.isLeft(decoded)) return Effect.fail(corrupt(goalId, expected, decoded.left))
    events.push(decoded.right)
  }
  return Effect.succeed(events)
}
