/** Events to and from `events` rows: the slim payload, and decoding a row checked against its key. */
import { Effect, Either, Schema } from "effect"
import { Event, StateStore } from "@rx/kernel"
import { field } from "./sql.js"

/** A stored event that cannot be read: never skipped. */
export const corrupt = (goalId: string, seq: number, why: string): Effect.Effect<never, StateStore.StoreError> =>
  Effect.fail(
    new StateStore.StoreError({
      message: `goal ${goalId}, seq ${seq}: ${why}. rx never skips or repairs an event: restore the database from a backup`,
      goalId,
      seq
    })
  )

/**
 * The payload stored for an event: its JSON without `_tag`, `goalId` and `seq`, which the
 * row's columns already hold (about 70 bytes less per event).
 */
export const slimJson = (event: Event.Event): string => {
  const { _tag: _t, goalId: _g, seq: _s, ...rest } = Event.is(event) ? event : encodeEvent(event)
  return JSON.stringify(rest)
}

const encodeEvent = Schema.encodeSync(Event.Event)

/**
 * An event from its row. A slim payload gets `_tag`, `goalId` and `seq` back from the columns,
 * in the order the runner writes them (so `rx events` prints what `rx run --json` printed); a
 * payload with its own `goalId` (written before payloads were slim) is decoded as it is, and
 * its ids are checked against the row by the caller.
 */
const decodePayload = (
  payload: string,
  tag: unknown,
  version: number,
  goalId: string,
  seq: number
): Either.Either<Event.Event, string> =>
  Either.flatMap(
    Either.try({ try: (): unknown => JSON.parse(payload), catch: (error) => `not JSON: ${error instanceof Error ? error.message : String(error)}` }),
    (value) =>
      typeof value === "object" && value !== null && !Array.isArray(value) && !("goalId" in value)
        ? Event.decode({ _tag: tag, goalId, seq, ...value }, version)
        : Event.decode(value, version)
  )

/**
 * One row of `events` (`seq, tag, version, payload`) expected at `seq`, decoded; or why it
 * cannot be read (a gap, no payload, a payload that does not decode, ids that differ from the row).
 */
export const decodeRow = (goalId: string, seq: number, row: unknown): Either.Either<Event.Event, string> => {
  const stored = field(row, "seq")
  if (stored !== seq) return Either.left(`the log has no event at this seq (the next stored one is ${String(stored)})`)
  const version = field(row, "version")
  const payload = field(row, "payload")
  if (typeof version !== "number" || typeof payload !== "string") return Either.left("the row has no version or payload")
  const decoded = decodePayload(payload, field(row, "tag"), version, goalId, seq)
  if (Either.isLeft(decoded)) return Either.left(`the stored event (encoding version ${version}) does not decode: ${decoded.left}`)
  const event = decoded.right
  if (event.goalId !== goalId || event.seq !== seq) return Either.left(`the stored event says goal ${event.goalId}, seq ${event.seq}`)
  return Either.right(event)
}

/**
 * Rows of `events` (`seq, tag, version, payload`), decoded in one plain loop. With `fromSeq`, rows
 * must be the seqs from it with no gap; without, any ascending subset. A gap, a bad row or a
 * mismatched event fails naming goal and seq.
 */
export const decodeRows = (
  goalId: string,
  fromSeq: number | undefined,
  rows: ReadonlyArray<unknown>
): Effect.Effect<ReadonlyArray<Event.Event>, StateStore.StoreError> => {
  const events: Array<Event.Event> = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]
    const seq = field(row, "seq")
    const expected = fromSeq === undefined ? (typeof seq === "number" ? seq : -1) : fromSeq + i
    const decoded = decodeRow(goalId, expected, row)
    if (Either.isLeft(decoded)) return corrupt(goalId, expected, decoded.left)
    events[i] = decoded.right
  }
  return Effect.succeed(events)
}
