/**
 * Events to and from `events` rows. A row's `format` column says how its payload is written, and
 * the decoder goes by it, never by the payload's shape:
 * - 1, full: the event's whole JSON encoding, `_tag`, `goalId` and `seq` included (checked
 *   against the row's columns). No rx writes it; rows can be marked so by hand (see the README).
 * - 2, slim: the encoding without `_tag`, `goalId` and `seq`, which the row's columns hold (about
 *   70 bytes less per event). The store writes this one.
 */
import { Effect, Either, Schema } from "effect"
import { Event, StateStore } from "@rx/kernel"
import { checksum } from "./checksum.js"

/** The payload formats a row may name in its `format` column. */
export const Format = { full: 1, slim: 2 } as const

/** A stored event that cannot be read: never skipped. */
export const corrupt = (goalId: string, seq: number, why: string): Effect.Effect<never, StateStore.StoreError> =>
  Effect.fail(
    new StateStore.StoreError({
      message: `goal ${goalId}, seq ${seq}: ${why}. rx never skips or repairs an event: restore the database from a backup`,
      goalId,
      seq
    })
  )

/** The slim payload of an event (format 2). */
export const slimJson = (event: Event.Event): string => {
  const { _tag: _t, goalId: _g, seq: _s, ...rest } = Event.is(event) ? event : encodeEvent(event)
  return JSON.stringify(rest)
}

const encodeEvent = Schema.encodeSync(Event.Event)

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const parse = (payload: string): Either.Either<unknown, string> =>
  Either.try({ try: (): unknown => JSON.parse(payload), catch: (error) => `not JSON: ${error instanceof Error ? error.message : String(error)}` })

/** A payload of `format`, with the row's tag and ids, as the event's encoding to decode; or why it is not one. */
const encodingOf = (format: unknown, value: unknown, tag: unknown, goalId: string, seq: number): Either.Either<unknown, string> => {
  if (!isObject(value)) return Either.left("the payload is not a JSON object")
  if (format === Format.slim) {
    if ("_tag" in value || "goalId" in value || "seq" in value) {
      return Either.left(
        "the row says its payload is slim (format 2), but the payload holds _tag, goalId or seq as a full one does (a log written before rx 0.1 has such rows: see the store's README to mark them format 1)"
      )
    }
    // The row's ids first, in the order the runner writes them (so `rx events` prints what `rx run --json` printed).
    return Either.right({ _tag: tag, goalId, seq, ...value })
  }
  if (format === Format.full) {
    if (!("_tag" in value) || !("goalId" in value) || !("seq" in value)) {
      return Either.left("the row says its payload is full (format 1), but the payload lacks _tag, goalId or seq")
    }
    if (value["_tag"] !== tag) return Either.left(`the row is a ${String(tag)}, but its payload is a ${String(value["_tag"])}`)
    return Either.right(value)
  }
  return Either.left(`the row names payload format ${String(format)}, which this rx does not know (1: full, 2: slim); if a newer rx wrote it, upgrade rx`)
}

/** An `events` row as column values, in the order of `eventColumns`: seq, tag, version, format, payload, checksum. */
export type EventRow = ReadonlyArray<unknown>

/**
 * Why the row's payload is not what rx wrote, by its checksum; undefined when it matches, or the
 * row has none (written before the column existed) or no payload (which decoding reports).
 */
export const checksumProblem = (row: EventRow): string | undefined => {
  const stored = row[5]
  const payload = row[4]
  if (stored === null || stored === undefined || typeof payload !== "string") return undefined
  if (typeof stored !== "number") return `the row's checksum is not a number (${String(stored)})`
  const actual = checksum(payload)
  return actual === stored
    ? undefined
    : `its payload does not match the checksum rx stored with it (stored ${stored}, the payload gives ${actual}): its bytes changed after rx wrote them (a flipped bit on disk, or an edit by hand)`
}

/**
 * One row of `events` expected at `seq`, decoded; or why it cannot be read (a gap, no payload, a
 * checksum that does not match, a payload that does not match its format or does not decode, ids
 * that differ from the row).
 */
export const decodeRow = (goalId: string, seq: number, row: EventRow): Either.Either<Event.Event, string> => {
  const stored = row[0]
  if (stored !== seq) return Either.left(`the log has no event at this seq (the next stored one is ${String(stored)})`)
  const version = row[2]
  const payload = row[4]
  if (typeof version !== "number" || typeof payload !== "string") return Either.left("the row has no version or payload")
  const changed = checksumProblem(row)
  if (changed !== undefined) return Either.left(changed)
  const value = parse(payload)
  const encoded = Either.isLeft(value) ? value : encodingOf(row[3], value.right, row[1], goalId, seq)
  const decoded = Either.isLeft(encoded) ? encoded : Event.decode(encoded.right, version)
  if (Either.isLeft(decoded)) return Either.left(`the stored event (encoding version ${version}) does not decode: ${decoded.left}`)
  const event = decoded.right
  if (event.goalId !== goalId || event.seq !== seq) return Either.left(`the stored event says goal ${event.goalId}, seq ${event.seq}`)
  return Either.right(event)
}

/**
 * Rows of `events` decoded in one plain loop. With `fromSeq`, rows must be the seqs from it with
 * no gap; without, any ascending subset. A gap, a bad row or a mismatched event fails naming goal
 * and seq.
 */
export const decodeRows = (
  goalId: string,
  fromSeq: number | undefined,
  rows: ReadonlyArray<EventRow>
): Effect.Effect<ReadonlyArray<Event.Event>, StateStore.StoreError> => {
  const events: Array<Event.Event> = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] ?? []
    const seq = row[0]
    const expected = fromSeq === undefined ? (typeof seq === "number" ? seq : -1) : fromSeq + i
    const decoded = decodeRow(goalId, expected, row)
    if (Either.isLeft(decoded)) return corrupt(goalId, expected, decoded.left)
    events[i] = decoded.right
  }
  return Effect.succeed(events)
}

/** The schema version that added the `format` column. */
export const formatColumnSince = 3

/** The schema version that added the `checksum` column. */
export const checksumColumnSince = 4

/**
 * The columns `decodeRow` reads, in its order, from a schema of `version`. Schemas before the
 * `format` column hold slim payloads only (rx 0.1 wrote them so), which the migration records as
 * format 2 too; rows of schemas before the `checksum` column have none.
 */
export const eventColumns = (version: number): string =>
  version >= checksumColumnSince
    ? "seq, tag, version, format, payload, checksum"
    : version >= formatColumnSince
    ? "seq, tag, version, format, payload, NULL AS checksum"
    : `seq, tag, version, ${Format.slim} AS format, payload, NULL AS checksum`
