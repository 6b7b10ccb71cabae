/**
 * A goal's events over HTTP, from the store's change stream: JSON lines (`Event.encodeJson`, as
 * `rx events` prints), or Server-Sent Events whose `id` is the seq, so `Last-Event-ID` resumes
 * exactly after the last event a client saw. The response ends after `Terminated`.
 *
 * Each follower has a bounded buffer between the log and its connection. A client that reads
 * slower than the log grows is waited for while the buffer has room (the log is read no further
 * meanwhile); a client that takes nothing for `stallMs` with its buffer full is disconnected (it
 * may reconnect where it stopped). Nothing is ever buffered without limit.
 */
import * as Sse from "@effect/experimental/Sse"
import { HttpServerResponse } from "@effect/platform"
import { Event, StateStore } from "@rx/kernel"
import { Chunk, Effect, Option, type Scope } from "effect"
import { Readable } from "node:stream"
import { InternalError, NotFound, Unavailable } from "../ApiError.js"

/** A count of followers, bounded: a follower holds a place for as long as its response lasts. */
export const makeSubscribers = (max: number) => {
  let count = 0
  return {
    /** A place for this request's response, given back when its scope (the request's) closes. */
    acquire: Effect.acquireRelease(
      Effect.suspend(() => {
        if (count >= max) {
          return Effect.fail(new Unavailable({ reason: "too_many_subscribers", message: `${max} clients are following events already; try again later` }))
        }
        count++
        return Effect.void
      }),
      () => Effect.sync(() => void count--)
    ),
    count: () => count
  }
}

/**
 * The server's closing, as the event streams see it: each response registers how it ends, and
 * closing ends them all (a callback each, where a fiber per response awaiting a Deferred would cost
 * a fiber's start and stop per request).
 */
export const makeClosing = () => {
  let closed = false
  const ends = new Set<() => void>()
  return {
    /** Run `end` when the server closes (at once if it has), for as long as the scope lasts. */
    whenClosing: (end: () => void): Effect.Effect<void, never, Scope.Scope> =>
      Effect.acquireRelease(
        Effect.sync(() => {
          if (closed) end()
          else ends.add(end)
        }),
        () => Effect.sync(() => void ends.delete(end))
      ),
    /** End every stream, and any opened later. */
    close: Effect.sync(() => {
      closed = true
      for (const end of ends) end()
      ends.clear()
    })
  }
}
export type Closing = ReturnType<typeof makeClosing>

export interface Follow {
  readonly goalId: string
  /** The last seq the client has (`Last-Event-ID`, `?from=`); events after it follow. */
  readonly after: number | undefined
  /** Until `Terminated`, or (false) only the events recorded when the request came. */
  readonly follow: boolean
  readonly sse: boolean
  /** Events buffered for this client. */
  readonly buffer: number
  /** How long a client may take nothing with its buffer full before it is disconnected. */
  readonly stallMs: number
  /** The server shutting down: every stream ends. */
  readonly closing: Closing
  /** Close the client's connection (a response blocked on a full socket cannot end otherwise). */
  readonly disconnect: Effect.Effect<void>
}

/** SSE comments at this interval keep proxies from closing a quiet stream. */
const keepAlive = "15 seconds"

const encoder = new TextEncoder()

const line = (event: Event.Event) => `${Event.encodeJson(event)}\n`
const sseEvent = (event: Event.Event) =>
  Sse.encoder.write({ _tag: "Event", event: "message", id: String(event.seq), data: Event.encodeJson(event) })

/** The response following a goal's events. */
export const respond = (
  follow: Follow
): Effect.Effect<HttpServerResponse.HttpServerResponse, NotFound | InternalError, StateStore.StateStore | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const summary = yield* store.goal(follow.goalId).pipe(
      Effect.mapError((error) => new InternalError({ message: `the goal log failed: ${error.message}` }))
    )
    if (Option.isNone(summary)) return yield* new NotFound({ goalId: follow.goalId, message: `no goal with id ${follow.goalId}` })
    const from = follow.after === undefined ? 0 : follow.after + 1
    // Past the end of a terminated goal nothing will ever follow. An EventSource reconnects after
    // every end unless told 204; a JSON-lines client gets an empty body.
    const end = summary.value.nextSeq
    if ((summary.value.status === "terminated" || !follow.follow) && from >= end) {
      return follow.sse ? HttpServerResponse.empty({ status: 204 }) : HttpServerResponse.text("", { contentType: "application/x-ndjson" })
    }
    const body = yield* pump(store, follow, from, follow.follow ? undefined : end - 1)
    return HttpServerResponse.raw(body, {
      contentType: follow.sse ? "text/event-stream" : "application/x-ndjson",
      headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
    })
  })

/**
 * The log's events from `from` (to `last`, if given) as the body of the response, a Node stream
 * the server writes to the connection as it is read. A fiber in the request's scope reads the
 * change stream and pushes each chunk of events, encoded as one piece of text, into the body; the
 * body holds at most `buffer` events that the connection has not taken: with that many, the fiber
 * waits for the connection to take some, and a client that takes nothing for `stallMs` is
 * disconnected. The body ends after `Terminated` (or `last`), when the log cannot be read, when
 * the server closes (once the connection took what the body holds; the server closes connections
 * still open after its grace), or when the client stalls (what it still held is dropped; the
 * client may reconnect). The body is not an Effect stream: a stream's every stage costs about as
 * much to start as a whole request here, and a hop between fibers for every chunk of events.
 */
const pump = (
  store: StateStore.Service,
  follow: Follow,
  from: number,
  last: number | undefined
): Effect.Effect<Readable, never, Scope.Scope> =>
  Effect.gen(function*() {
    const ends = (event: Event.Event) => event._tag === "Terminated" || (last !== undefined && event.seq >= last)
    const encode = follow.sse ? sseEvent : line
    /** Called when the body has handed on all it held, while the fiber waits for room. */
    let wake: (() => void) | undefined
    const body = new Readable({
      objectMode: true,
      highWaterMark: 1,
      read() {
        const resume = wake
        wake = undefined
        resume?.()
      }
    })
    // The events in each piece pushed, oldest first; those the body still holds are the last `readableLength`.
    const pending: Array<number> = []
    const held = () => {
      pending.splice(0, pending.length - body.readableLength)
      let events = 0
      for (const count of pending) events += count
      return events
    }
    /** Whether the body takes more: not ended (by `Terminated`, the log failing or the server closing), not destroyed. */
    let ended = false
    const open = () => !ended && !body.destroyed
    const end = () => {
      if (!open()) return
      ended = true
      body.push(null)
    }
    /** Push `events`, encoded once, as one piece; then, while the body holds more than `buffer` events, wait for it to hand them on. */
    const push = (events: ReadonlyArray<Event.Event>): Effect.Effect<void, "stalled"> =>
      Effect.suspend(() => {
        if (!open()) return Effect.void
        let text = ""
        for (const event of events) text += encode(event)
        body.push(encoder.encode(text))
        pending.push(events.length)
        if (held() <= follow.buffer) return Effect.void
        return Effect.async<void>((resume) => {
          if (held() <= follow.buffer || !open()) return resume(Effect.void)
          wake = () => resume(Effect.void)
          return Effect.sync(() => void (wake = undefined))
        }).pipe(
          Effect.timeoutOption(follow.stallMs),
          Effect.flatMap((taken) => (Option.isSome(taken) ? Effect.void : Effect.fail("stalled" as const)))
        )
      })
    // A chunk ends at the event that ends the response (nothing after it is sent), and is pushed
    // in pieces of at most `buffer` events: a long log read at once must wait for the connection too.
    const offer = (chunk: Chunk.Chunk<Event.Event>) => {
      const all = Chunk.toReadonlyArray(chunk)
      const stop = all.findIndex(ends)
      const events = stop === -1 ? all : all.slice(0, stop + 1)
      if (events.length <= follow.buffer) return push(events)
      return Effect.forEach(
        Array.from({ length: Math.ceil(events.length / follow.buffer) }, (_, i) => events.slice(i * follow.buffer, (i + 1) * follow.buffer)),
        push,
        { discard: true }
      )
    }
    // The log pulled chunk by chunk (no Stream: see `StateStore.follow`), until the chunk that ends the body.
    const reading = Effect.scoped(Effect.flatMap(StateStore.follow(store, follow.goalId, from), (next) => {
      const loop: Effect.Effect<void, StateStore.StoreError | "stalled"> = Effect.flatMap(next, (chunk) =>
        Effect.zipRight(offer(chunk), Chunk.some(chunk, ends) ? Effect.void : loop))
      return loop
    })).pipe(
      Effect.tapError((error) =>
        error === "stalled"
          ? Effect.zipRight(
            Effect.logWarning(`a client following goal ${follow.goalId} took nothing for ${follow.stallMs} ms with its buffer full: disconnected`),
            Effect.zipRight(Effect.sync(() => void body.destroy()), follow.disconnect)
          )
          : Effect.logError(`the events of goal ${follow.goalId} could not be read: ${error.message}`)
      ),
      Effect.ignore,
      Effect.zipRight(Effect.sync(end))
    )
    // The server closing ends the body once the connection took what it holds (the server closes connections left after its grace).
    yield* follow.closing.whenClosing(end)
    // A comment after each quiet interval (the body holds nothing).
    const keepingAlive = Effect.forever(Effect.zipRight(
      Effect.sleep(keepAlive),
      Effect.sync(() => {
        if (body.readableLength === 0 && open()) {
          body.push(encoder.encode(": keep-alive\n\n"))
          pending.push(0)
        }
      })
    ))
    // Forked while the request acquires its resources (uninterruptibly): made interruptible, or closing would wait for it.
    yield* Effect.forkScoped(Effect.interruptible(reading))
    if (follow.sse) yield* Effect.forkScoped(Effect.interruptible(keepingAlive))
    return body
  })
