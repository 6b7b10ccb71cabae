/**
 * A typed client of a running rx server, derived from `Api` with @effect/platform's
 * `HttpApiClient`: the same Schemas encode the requests and decode the answers, and every error
 * body comes back as its `ApiError` class. A goal's events come as a `Stream` of kernel events
 * that, when following, reconnects after the last event seen if the server drops the connection.
 *
 * ```ts
 * const program = Effect.gen(function*() {
 *   const rx = yield* Client.Client
 *   const { goalId } = yield* rx.submit({ goal: "add a test for parse()" })
 *   yield* Stream.runForEach(rx.events(goalId), (event) => Console.log(event._tag))
 * }).pipe(Effect.provide(Client.layer({ url: "http://127.0.0.1:7433", token })), Effect.provide(FetchHttpClient.layer))
 * ```
 */
import { HttpApiClient, type HttpApiError, HttpClient, type HttpClientError, HttpClientRequest } from "@effect/platform"
import { Event, Issues } from "@rx/kernel"
import { Context, Duration, Effect, Either, Layer, Option, ParseResult, Predicate, Redacted, Schema, Stream } from "effect"
import * as Api from "./Api.js"
import * as ApiError from "./ApiError.js"
import type * as View from "./View.js"

/** The server could not be reached, or answered something that is not this API. */
export class ClientError extends Schema.TaggedError<ClientError>()("@rx/server/ClientError", {
  url: Schema.String,
  message: Schema.String
}) {}

/** What a call can fail with: an error body of the API, or `ClientError`. */
export type Failure = ApiError.ApiError | ClientError

export interface Options {
  /** The server's base URL, such as `http://127.0.0.1:7433`. */
  readonly url: string
  /** Its bearer token. */
  readonly token: string | Redacted.Redacted
}

export interface Service {
  readonly url: string
  /**
   * Submit a goal: its id once its `GoalSubmitted` is durable on the server. `options` need only
   * the limits to set; a request that does not decode fails here (`BadRequest`), unsent.
   */
  readonly submit: (
    request: typeof Api.SubmitRequest.Encoded,
    options?: {
      /** Sent as `Idempotency-Key`: submitting again with the same key and request answers the goal recorded first. */
      readonly idempotencyKey?: string
    }
  ) => Effect.Effect<Api.Submitted, Failure>
  /** One page of goals, newest first. */
  readonly list: (params?: { readonly status?: Api.GoalStatus; readonly limit?: number; readonly cursor?: string; readonly parent?: string; readonly forkedFrom?: string }) => Effect.Effect<Api.GoalPage, Failure>
  /** Every goal (with `status`), newest first, a page at a time. */
  readonly goals: (params?: { readonly status?: Api.GoalStatus; readonly parent?: string; readonly forkedFrom?: string }) => Stream.Stream<Api.Goal, Failure>
  readonly goal: (goalId: string) => Effect.Effect<Api.Goal, Failure>
  /** The goal whole, as `rx inspect` shows it (`View.Goal`). */
  readonly view: (goalId: string) => Effect.Effect<View.Goal, Failure>
  /**
   * The goal's events after `after` (all by default). Following (the default), the stream ends
   * after `Terminated`; otherwise with the last event recorded when it was asked for.
   */
  readonly events: (goalId: string, options?: { readonly after?: number; readonly follow?: boolean }) => Stream.Stream<Event.Event, Failure>
  readonly cancel: (goalId: string) => Effect.Effect<Api.Goal, Failure>
  /** Approve the call `callId` (it runs exactly as requested) or deny it (the model is told `reason`). */
  readonly decide: (goalId: string, callId: string, decision: Api.Decision) => Effect.Effect<Api.Goal, Failure>
  readonly resume: (goalId: string) => Effect.Effect<Api.Goal, Failure>
  /** Send the goal a message for its next request; a retry with the same `idempotencyKey` sends it once. */
  readonly say: (goalId: string, message: Api.Message, options?: { readonly idempotencyKey?: string }) => Effect.Effect<Api.Goal, Failure>
}

export class Client extends Context.Tag("@rx/server/Client")<Client, Service>() {}

/** Connections in a row that end with no event before `events` gives up following. */
const maxEmptyReconnects = 3
const reconnectDelay = Duration.seconds(1)

const errorBody = Schema.Union(
  ApiError.BadRequest,
  ApiError.Unauthorized,
  ApiError.Forbidden,
  ApiError.NotFound,
  ApiError.Conflict,
  ApiError.PayloadTooLarge,
  ApiError.Unavailable,
  ApiError.InternalError
)
const decodeErrorBody = Schema.decodeUnknownEither(Schema.parseJson(errorBody))

/** A failure of the connection or of decoding, not an error body of the API. */
type Transport = HttpClientError.HttpClientError | ParseResult.ParseError | HttpApiError.HttpApiDecodeError
const isTransport = (e: unknown): e is Transport =>
  ["RequestError", "ResponseError", "ParseError", "HttpApiDecodeError"].some((tag) => Predicate.isTagged(e, tag))

const decodeSubmit = Schema.decodeUnknown(Api.SubmitRequest, { onExcessProperty: "error" })

/** The path of a request's first problem, as the server's `BadRequest` names fields. */
const fieldOf = (error: ParseResult.ParseError): string => {
  const path = ParseResult.ArrayFormatter.formatErrorSync(error)[0]?.path ?? []
  return path.length === 0 ? "request" : path.map(String).join(".")
}

/** A client of the server at `options.url`. */
export const make = (options: Options): Effect.Effect<Service, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const url = options.url.replace(/\/+$/, "")
    const token = Redacted.isRedacted(options.token) ? Redacted.value(options.token) : options.token
    const http = (yield* HttpClient.HttpClient).pipe(
      HttpClient.mapRequest((request) => HttpClientRequest.bearerToken(HttpClientRequest.prependUrl(request, url), token))
    )
    const api = yield* HttpApiClient.make(Api.Api).pipe(Effect.provideService(HttpClient.HttpClient, http))

    const unreachable = (error: Transport): ClientError | ApiError.BadRequest => {
      switch (error._tag) {
        case "RequestError":
          return new ClientError({ url, message: `cannot reach the rx server at ${url}: ${error.cause instanceof Error ? error.cause.message : error.message}` })
        case "ResponseError":
          return new ClientError({ url, message: `the server at ${url} answered ${error.response.status}, which is not rx's API (${error.message})` })
        case "ParseError":
          return new ClientError({ url, message: `the server at ${url} answered something that is not rx's API: ${error.message}` })
        case "HttpApiDecodeError":
          return new ApiError.BadRequest({ field: "request", message: error.message })
      }
    }
    const call = <A, E>(effect: Effect.Effect<A, E | Transport>): Effect.Effect<A, Exclude<E, Transport> | ClientError | ApiError.BadRequest> =>
      Effect.catchIf(effect, (e): e is Transport => isTransport(e), (e) => Effect.fail(unreachable(e)))

    const list: Service["list"] = (params = {}) => call(api.goals.list({ urlParams: { limit: 50, ...params } }))

    /** One connection's events: the response's JSON lines, each decoded. */
    const connection = (goalId: string, after: number | undefined, follow: boolean): Stream.Stream<Event.Event, Failure> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const params = { ...(after === undefined ? {} : { from: String(after) }), ...(follow ? {} : { follow: "false" }) }
        const response = yield* http.get(`/v1/goals/${encodeURIComponent(goalId)}/events`, { urlParams: params }).pipe(
          Effect.mapError(unreachable)
        )
        if (response.status !== 200) {
          const text = yield* response.text.pipe(Effect.orElseSucceed(() => ""))
          const body = decodeErrorBody(text)
          return yield* Either.isRight(body)
            ? Effect.fail(body.right)
            : Effect.fail(new ClientError({ url, message: `the server at ${url} answered ${response.status} to the events of goal ${goalId}, which is not rx's API` }))
        }
        return response.stream.pipe(
          Stream.mapError(unreachable),
          Stream.decodeText(),
          Stream.splitLines,
          Stream.filter((line) => line.trim() !== ""),
          Stream.mapEffect((line) =>
            Either.match(Event.decodeJson(line), {
              onLeft: (message) => Effect.fail(new ClientError({ url, message: `the server at ${url} sent an event of goal ${goalId} this rx cannot read: ${message}` })),
              onRight: Effect.succeed
            })
          )
        )
      }))

    /** Following: reconnect after the last event seen until `Terminated`, unless connections keep ending empty. */
    const following = (goalId: string, after: number | undefined, empties: number): Stream.Stream<Event.Event, Failure> =>
      Stream.suspend(() => {
        let last = after
        let ended = false
        const seen = Stream.tap(connection(goalId, after, true), (event) =>
          Effect.sync(() => {
            last = event.seq
            ended = event._tag === "Terminated"
          }))
        const next = Stream.suspend(() => {
          if (ended) return Stream.empty
          if (last !== after) return following(goalId, last, 0)
          if (empties + 1 >= maxEmptyReconnects) {
            return Stream.fail(new ClientError({ url, message: `the server at ${url} keeps ending the events of goal ${goalId} before it terminates` }))
          }
          return Stream.concat(Stream.drain(Stream.fromEffect(Effect.sleep(reconnectDelay))), following(goalId, last, empties + 1))
        })
        return Stream.concat(seen, next)
      })

    return {
      url,
      submit: (request, options = {}) =>
        decodeSubmit(request).pipe(
          Effect.mapError((error) => new ApiError.BadRequest({ field: fieldOf(error), message: Issues.format(error) })),
          Effect.flatMap((payload) =>
            call(api.goals.submit({ payload, headers: options.idempotencyKey === undefined ? {} : { "idempotency-key": options.idempotencyKey } }))
          )
        ),
      list,
      goals: (params = {}) =>
        Stream.paginateEffect(undefined as string | undefined, (cursor) =>
          Effect.map(list({ ...params, limit: 100, ...(cursor === undefined ? {} : { cursor }) }), (page) => [
            page.goals,
            page.cursor === null ? Option.none() : Option.some(page.cursor)
          ] as const)).pipe(Stream.flattenIterables),
      goal: (goalId) => call(api.goals.get({ path: { id: goalId } })),
      view: (goalId) => call(api.goals.view({ path: { id: goalId } })),
      events: (goalId, options = {}) =>
        options.follow === false ? connection(goalId, options.after, false) : following(goalId, options.after, 0),
      cancel: (goalId) => call(api.goals.cancel({ path: { id: goalId } })),
      decide: (goalId, callId, decision) => call(api.goals.decide({ path: { id: goalId, callId }, payload: decision })),
      resume: (goalId) => call(api.goals.resume({ path: { id: goalId } })),
      say: (goalId, message, options = {}) =>
        call(api.goals.say({ path: { id: goalId }, payload: message, headers: options.idempotencyKey === undefined ? {} : { "idempotency-key": options.idempotencyKey } }))
    } satisfies Service
  })

/** The client as a Layer; it needs an `HttpClient` (`FetchHttpClient.layer`, `NodeHttpClient.layer`). */
export const layer = (options: Options): Layer.Layer<Client, never, HttpClient.HttpClient> => Layer.effect(Client, make(options))
