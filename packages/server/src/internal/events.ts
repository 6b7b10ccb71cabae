/**
 * A goal's events over HTTP, from the store's change stream: JSON lines (`Event.encodeJson`, as
 * `rx events` prints), or Server-Sent Events whose `id` is the seq, so `Last-Event-ID` resumes
 * exactly after the last event a client saw. The response ends after `Terminated`.
 *
 * Each follower has a bounded buffer between the log and its connection. A client that reads
 * slower than the log grows is waited for while the buffer has room (the log is read no further
 * meanwhile); a client that takes nothing for `stallMs` with its buffer full is disconnected (it
 * may reconnect where it stopped). Nothing is ever buffered without limit.
 *
 * The request's own fiber reads the log and writes each chunk of events, encoded once, to the
 * connection: no Effect stream (its every stage costs about as much to start as a whole request
 * here, and a hop between fibers per chunk), no Node stream piped to the connection (its
 * `pipeline` makes an AbortController and an AbortError per response), no second fiber.
 */
import * as Sse from "@effect/experimental/Sse"
import { HttpServerResponse } from "@effect/platform"
import { Event, StateStore } from "@rx/kernel"
import { Chunk, Effect, Either, Option, type Scope } from "effect"
import type { ServerResponse } from "node:http"
import { InternalError, NotFound, Unavailable } from "../ApiError.js"
import { acquireSync } from "./release.js"

/** A count of followers, bounded: a follower holds a place for as long as its response lasts. */
export const makeSubscribers = (max: number) => {
  let count = 0
  return {
    /** A place for this request's response, given back when its scope (the request's) closes. */
    acquire: acquireSync(
      Effect.suspend(() => {
        if (count >= max) {
          return Effect.fail(new Unavailable({ reason: "too_many_subscribers", message: `${max} clients are following events already; try again later` }))
        }
        count++
        return Effect.void
      }),
      () => void count--
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
      acquireSync(
        Effect.sync(() => {
          if (closed) end()
          else ends.add(end)
        }),
        () => void ends.delete(end)
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
  /** The client's connection: the response is written to it here, as the log is read. */
  readonly connection: ServerResponse
  /** A HEAD request: the status and headers only, written by the server. */
  readonly head: boolean
}

/** SSE comments at this interval keep proxies from closing a quiet stream. */
const keepAlive = "15 seconds"

const line = (event: Event.Event) => `${Event.encodeJson(event)}\n`
const sseEvent = (event: Event.Event) =>
  Sse.encoder.write({ _tag: "Event", event: "message", id: String(event.seq), data: Event.encodeJson(event) })

/** The response's status and headers, written before the first events. */
const streaming = {
  sse: HttpServerResponse.raw(null, { contentType: "text/event-stream", headers: { "cache-control": "no-cache", "x-accel-buffering": "no" } }),
  lines: HttpServerResponse.raw(null, { contentType: "application/x-ndjson", headers: { "cache-control": "no-cache", "x-accel-buffering": "no" } })
}

/**
 * The response following a goal's events. When there are events to send, it is written to the
 * connection here, until it ends; what is returned then is what was sent (the server writes
 * nothing more to a connection whose response has ended).
 */
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
    const response = follow.sse ? streaming.sse : streaming.lines
    if (follow.head) return response
    yield* Effect.interruptible(write(store, follow, response, from, follow.follow ? undefined : end - 1))
    return response
  })

/**
 * Write the log's events from `from` (to `last`, if given) to the connection, each chunk read
 * encoded as one piece of text, until the response ends. The connection holds at most `buffer`
 * events it has not taken: with that many, the log is read no further until it takes some, and
 * a client that takes nothing for `stallMs` is disconnected (what it still held is dropped; it
 * may reconnect). The response ends after `Terminated` (or `last`), when the log cannot be read,
 * or when the server closes (once the connection took what it holds; the server closes
 * connections still open after its grace): then this fiber is interrupted.
 */
const write = (
  store: StateStore.Service,
  follow: Follow,
  response: HttpServerResponse.HttpServerResponse,
  from: number,
  last: number | undefined
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.withFiberRuntime((fiber) => {
    const connection = follow.connection
    const ends = (event: Event.Event) => event._tag === "Terminated" || (last !== undefined && event.seq >= last)
    const encode = follow.sse ? sseEvent : line
    /** Events written that the connection has not taken yet. */
    let held = 0
    /** Called when the connection took enough, while the fiber waits for room. */
    let wake: (() => void) | undefined
    /** Whether the response takes more: not ended (by `Terminated`, the log failing or the server closing), not destroyed. */
    let ended = false
    const open = () => !ended && !connection.destroyed
    const send = (text: string, events: number) => {
      held += events
      connection.write(text, () => {
        held -= events
        if (held <= follow.buffer && wake !== undefined) {
          const resume = wake
          wake = undefined
          resume()
        }
      })
    }
    const end = () => {
      if (!open()) return
      ended = true
      connection.end()
    }
    /** Write `events`, encoded once, as one piece; then, while the connection holds more than `buffer` events, wait for it to take them. */
    const push = (events: ReadonlyArray<Event.Event>): Effect.Effect<void, "stalled"> =>
      Effect.suspend(() => {
        if (!open()) return Effect.void
        let text = ""
        for (const event of events) text += encode(event)
        send(text, events.length)
        if (held <= follow.buffer) return Effect.void
        return Effect.async<void>((resume) => {
          if (held <= follow.buffer || !open()) return resume(Effect.void)
          wake = () => resume(Effect.void)
          return Effect.sync(() => void (wake = undefined))
        }).pipe(
          Effect.timeoutOption(follow.stallMs),
          Effect.flatMap((taken) => (Option.isSome(taken) ? Effect.void : Effect.fail("stalled" as const)))
        )
      })
    // A chunk ends at the event that ends the response (nothing after it is sent), and is written
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
    // The log pulled chunk by chunk (no Stream: see `StateStore.follow`), until the chunk that ends the response.
    const reading = Effect.scoped(Effect.flatMap(StateStore.follow(store, follow.goalId, from), (next) => {
      const loop: Effect.Effect<void, StateStore.StoreError | "stalled"> = Effect.flatMap(next, (chunk) =>
        Effect.zipRight(offer(chunk), Chunk.some(chunk, ends) ? Effect.void : loop))
      return loop
    }))
    // A comment after each quiet interval (the connection holds nothing).
    const keepingAlive = Effect.forever(Effect.zipRight(
      Effect.sleep(keepAlive),
      Effect.sync(() => {
        if (held === 0 && open()) send(": keep-alive\n\n", 0)
      })
    ))
    return Effect.gen(function*() {
      connection.writeHead(response.status, response.headers)
      // The server closing ends the response once the connection took what it holds, and this fiber with it.
      yield* follow.closing.whenClosing(() => {
        end()
        fiber.unsafeInterruptAsFork(fiber.id())
      })
      if (follow.sse) yield* Effect.forkScoped(keepingAlive)
      // Ended here, or else gone (the client left): then nothing is answered.
      const finish = Effect.suspend(() => {
        end()
        return connection.writableEnded ? Effect.void : Effect.interrupt
      })
      const outcome = yield* Effect.either(reading)
      if (Either.isRight(outcome)) return yield* finish
      if (outcome.left !== "stalled") {
        yield* Effect.logError(`the events of goal ${follow.goalId} could not be read: ${outcome.left.message}`)
        return yield* finish
      }
      yield* Effect.logWarning(`a client following goal ${follow.goalId} took nothing for ${follow.stallMs} ms with its buffer full: disconnected`)
      connection.destroy()
      // The connection is gone: nothing is answered.
      return yield* Effect.interrupt
    })
  })
