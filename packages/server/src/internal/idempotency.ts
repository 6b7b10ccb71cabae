/**
 * `Idempotency-Key` on `POST /v1/goals`: a client that retries a submission (after a timeout, a
 * dropped connection) gets the goal its first attempt recorded, never a second one. Durable with
 * no table of its own: the goal's id is derived from the key, and its `GoalSubmitted` records a
 * digest of the request (`metadata.idempotency`), so a retry, even after a restart, finds the
 * goal by its id and compares the requests.
 */
import { StateStore } from "@rx/kernel"
import { Effect, Option, Schema } from "effect"
import { createHash } from "node:crypto"
import * as Api from "../Api.js"
import { BadRequest, Conflict, InternalError } from "../ApiError.js"

/** The request header. */
export const header = "idempotency-key"

/** At most this many characters. */
const maxLength = 255

/** A key given: visible ASCII, 1 to 255 characters (as the IETF draft's examples and common APIs use). */
const valid = /^[\x21-\x7e]+$/

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex")

/** The key of a request, if it has one; a malformed one is a 400. */
export const keyOf = (headers: Readonly<Record<string, string | undefined>>): Effect.Effect<Option.Option<string>, BadRequest> => {
  const value = headers[header]
  if (value === undefined) return Effect.succeed(Option.none())
  return value.length > 0 && value.length <= maxLength && valid.test(value)
    ? Effect.succeed(Option.some(value))
    : Effect.fail(new BadRequest({ field: header, message: `${header}: expected 1 to ${maxLength} visible ASCII characters (no spaces), such as a UUID` }))
}

/** The goal id a key stands for: the same key, the same goal, on every attempt and after a restart. */
export const goalIdOf = (key: string): string => `k${sha256(`rx idempotency key\n${key}`).slice(0, 24)}`

/** JSON with object keys sorted, so equal requests have equal text. */
const canonical = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : typeof value === "object" && value !== null
    ? `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`).join(",")}}`
    : JSON.stringify(value) ?? "null"

const encodeRequest = Schema.encodeSync(Api.SubmitRequest)

/** The digest of a submission as decoded (defaults and spelling of the JSON aside): what a retry must repeat. */
export const digestOf = (request: Api.SubmitRequest): string => sha256(canonical(encodeRequest(request)))

/** What a goal submitted with a key records in its metadata. */
export const recordOf = (digest: string): Record<string, unknown> => ({ idempotency: { request: digest } })

const Recorded = Schema.Struct({ idempotency: Schema.Struct({ request: Schema.String }) })

/**
 * The goal a key already recorded, if any: its id when the request is the same; a 409 when the
 * key was used for another request (the client must use a new key for a new goal).
 */
export const recorded = (key: string, digest: string): Effect.Effect<Option.Option<string>, Conflict | InternalError, StateStore.StateStore> =>
  Effect.gen(function*() {
    const goalId = goalIdOf(key)
    const store = yield* StateStore.StateStore
    const failed = (error: StateStore.StoreError) => new InternalError({ message: `the goal log failed: ${error.message}` })
    if (Option.isNone(yield* store.goal(goalId).pipe(Effect.mapError(failed)))) return Option.none()
    const first = yield* StateStore.first(store, goalId, 0, ["GoalSubmitted"]).pipe(Effect.mapError(failed))
    const found = first._tag === "GoalSubmitted" ? Schema.decodeUnknownOption(Recorded)(first.options.metadata) : Option.none()
    if (Option.isSome(found) && found.value.idempotency.request === digest) return Option.some(goalId)
    return yield* new Conflict({
      goalId,
      message: `${header} ${JSON.stringify(key)} was used for another request, which recorded goal ${goalId}: a retry must send the same body; use a new key for a new goal`
    })
  })
