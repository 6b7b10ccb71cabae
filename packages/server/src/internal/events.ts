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
import { Chunk, Deferred, Effect, Exit, Option, Queue, type Scope, Stream } from "effect"
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
  /** Completed when the server shuts down: every stream ends. */
  readonly closing: Deferred.Deferred<void>
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
): Effect.Effect<HttpServerResponse.HttpServerResponse, NotFound | InternalError, StateStore.StateStore> =>
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
    const events = Stream.unwrapScoped(pump(store, follow, from, follow.follow ? undefined : end - 1))
    // One write per chunk of events, not per event.
    const text = Stream.mapChunks(events, (chunk) => Chunk.of(Chunk.join(Chunk.map(chunk, follow.sse ? sseEvent : line), "")))
    const body = follow.sse
      ? Stream.merge(text, Stream.tick(keepAlive).pipe(Stream.drop(1), Stream.as(": keep-alive\n\n")), { haltStrategy: "left" })
      : text
    return HttpServerResponse.stream(Stream.map(body, (text) => encoder.encode(text)), {
      contentType: follow.sse ? "text/event-stream" : "application/x-ndjson",
      headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
    })
  })

/**
 * The log's events from `from` (to `last`, if given), through a bounded buffer: a fiber reads the
 * change stream into it; the response takes from it. The stream ends after `Terminated` (or
 * `last`), when the server closes, when the log cannot be read, or when the client stalls.
 */
const pump = (
  store: StateStore.Service,
  follow: Follow,
  from: number,
  last: number | undefined
): Effect.Effect<Stream.Stream<Event.Event>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const buffer = yield* Queue.bounded<Event.Event>(follow.buffer)
    // Shutting the buffer down ends the response at once: when the server closes, a client
    // stalls, or the log cannot be read (what it still held is dropped; the client may reconnect).
    const end = Queue.shutdown(buffer)
    yield* Effect.forkScoped(Effect.zipRight(Deferred.await(follow.closing), end))
    const ends = (event: Event.Event) => event._tag === "Terminated" || (last !== undefined && event.seq >= last)
    // A chunk that fits is offered at once; only one that must wait for room is timed (a timer per event costs a fiber).
    const offer = (events: Chunk.Chunk<Event.Event>) =>
      Effect.flatMap(Queue.size(buffer), (size) =>
        size + Chunk.size(events) <= follow.buffer
          ? Queue.offerAll(buffer, events)
          : Effect.flatMap(
            Effect.timeoutOption(Queue.offerAll(buffer, events), follow.stallMs),
            (offered) => (Option.isSome(offered) ? Effect.void : Effect.fail("stalled" as const))
          ))
    yield* store.changes(follow.goalId, from).pipe(
      Stream.takeUntil(ends),
      Stream.runForEachChunk(offer),
      Effect.tapError((error) =>
        error === "stalled"
          ? Effect.zipRight(
            Effect.logWarning(`a client following goal ${follow.goalId} took nothing for ${follow.stallMs} ms with its buffer full: disconnected`),
            follow.disconnect
          )
          : Effect.logError(`the events of goal ${follow.goalId} could not be read: ${error.message}`)
      ),
      Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : end)),
      Effect.ignore,
      // Forked while the stream acquires its resources (uninterruptibly): made interruptible, or closing would wait for it.
      Effect.interruptible,
      Effect.forkScoped
    )
    return Stream.takeUntil(Stream.fromQueue(buffer), ends)
  })
