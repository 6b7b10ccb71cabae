/**
 * One HTTP attempt against a model server: send, wait for headers and body under an idle
 * timeout, and classify what went wrong so the caller can decide whether to try again.
 */
import type { HttpClient, HttpClientError, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Causes } from "@rx/kernel"
import { Data, Duration, Effect, Stream } from "effect"
import { isRetryableStatus } from "../Retry.js"
import * as Sse from "./sse.js"

/** The server could not be reached, or the connection broke. Worth another attempt. */
export class Transport extends Data.TaggedError("Transport")<{
  readonly refused: boolean
  readonly detail: string
}> {}

/** The server answered with an error status. */
export class Status extends Data.TaggedError("Status")<{
  readonly status: number
  readonly body: string
  readonly headers: { readonly [name: string]: string | undefined }
}> {}

/** The server went silent for longer than the idle timeout. Worth another attempt. */
export class Idle extends Data.TaggedError("Idle")<{
  readonly phase: "headers" | "body"
}> {}

export type AttemptError = Transport | Status | Idle

/** A successful answer: status 2xx and its whole body, or only its size when that passed the cap. */
export interface Answer {
  readonly status: number
  readonly body: string
  /** Bytes read before reading stopped at the cap; the body is then empty. */
  readonly oversize?: number
}

/** Connection errors that mean nothing is listening at the address. */
const refusedCodes = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"])

/** The `code`s and messages along an error's `cause` chain (undici nests them). */
const causes = (error: unknown): ReadonlyArray<{ code: string | undefined; message: string }> =>
  Causes.chain(error, 8).map((link) => ({ code: Causes.codeOf(link), message: Causes.messageOf(link) ?? String(link) }))

/** A network error as `refused` (nothing listens) and a one-line detail from its causes. */
export const describeCause = (cause: unknown): { readonly refused: boolean; readonly detail: string } => {
  const chain = causes(cause)
  const refused = chain.some((link) => link.code !== undefined && refusedCodes.has(link.code))
  const detail = chain.map((link) => link.code === undefined ? link.message : `${link.code}: ${link.message}`)
    .filter((text) => text !== "")
    .join(": ")
  return { refused, detail }
}

const transport = (error: HttpClientError.HttpClientError): Transport => {
  const { detail, refused } = describeCause(error.cause)
  return new Transport({ refused, detail: detail === "" ? error.message : detail })
}

const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((size, part) => size + part.length, 0))
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}

/** The response to `request`, its headers awaited under the idle timeout. */
const send = (client: HttpClient.HttpClient, request: HttpClientRequest.HttpClientRequest, idle: Duration.Duration) =>
  client.execute(request).pipe(
    Effect.mapError(transport),
    Effect.timeoutFail({ duration: idle, onTimeout: () => new Idle({ phase: "headers" }) })
  )

/** A response's body bytes, each chunk under the idle timeout. */
const bytesOf = (response: HttpClientResponse.HttpClientResponse, idle: Duration.Duration) =>
  response.stream.pipe(
    Stream.mapError(transport),
    Stream.timeoutFail(() => new Idle({ phase: "body" }), idle)
  )

/** The whole body, or only its size when that passed `maxBytes` (reading stops there). */
const readAll = (response: HttpClientResponse.HttpClientResponse, idle: Duration.Duration, maxBytes: number) =>
  Effect.map(
    bytesOf(response, idle).pipe(
      Stream.runFoldWhile(
        { parts: [] as Array<Uint8Array>, size: 0 },
        (acc) => acc.size <= maxBytes,
        (acc, chunk) => {
          acc.parts.push(chunk)
          acc.size += chunk.length
          return acc
        }
      )
    ),
    (read) => ({ size: read.size, over: read.size > maxBytes, body: read.size > maxBytes ? "" : new TextDecoder().decode(concat(read.parts)) })
  )

/** An error status, with its body (or what stands for a body over the cap). */
const statusError = (response: HttpClientResponse.HttpClientResponse, idle: Duration.Duration, maxBytes: number) =>
  Effect.flatMap(readAll(response, idle, maxBytes), (read) =>
    new Status({ status: response.status, body: read.over ? `(an error body over ${maxBytes} bytes)` : read.body, headers: response.headers }))

const ok = (status: number) => status >= 200 && status <= 299

/**
 * Send `request` and read the whole body, at most `maxBytes` of it: past that, reading stops
 * (the request is aborted) and only the size is kept, so memory stays bounded whatever the
 * server sends. Silence longer than `idle` (before the headers, or between two body chunks)
 * fails with `Idle`; interrupting the attempt aborts the request.
 */
export const attempt = (
  client: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest,
  idle: Duration.Duration,
  maxBytes: number
): Effect.Effect<Answer, AttemptError> =>
  Effect.gen(function*() {
    const response = yield* send(client, request, idle)
    if (!ok(response.status)) return yield* statusError(response, idle, maxBytes)
    const read = yield* readAll(response, idle, maxBytes)
    return read.over ? { status: response.status, body: "", oversize: read.size } : { status: response.status, body: read.body }
  })

/** A 2xx answer read line by line: its status, and its size when that passed the cap. */
export interface Lines {
  readonly status: number
  /** Bytes read when reading stopped at the cap (`maxBytes`); the lines then stop short. */
  readonly oversize?: number
}

/**
 * Send `request` and give each line of a 2xx body to `line` as it arrives (a streamed answer is
 * decoded while it comes); `line` answers whether reading may stop (the answer is complete, or
 * cannot be mended), and the rest of the body is then not waited for. Only the unfinished line
 * is held. Reading stops past `maxBytes`, as `attempt`'s does; an error status is read whole,
 * as `attempt` reads it. Timeouts as `attempt`'s.
 */
export const attemptLines = (
  client: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest,
  idle: Duration.Duration,
  maxBytes: number,
  line: (text: string) => boolean
): Effect.Effect<Lines, AttemptError> =>
  Effect.gen(function*() {
    const response = yield* send(client, request, idle)
    if (!ok(response.status)) return yield* statusError(response, idle, maxBytes)
    let size = 0
    const capped = bytesOf(response, idle).pipe(
      Stream.tap((chunk) => Effect.sync(() => (size += chunk.length))),
      Stream.takeWhile(() => size <= maxBytes)
    )
    yield* Sse.lines(capped).pipe(Stream.runForEachWhile((text) => Effect.sync(() => !line(text))))
    return size > maxBytes ? { status: response.status, oversize: size } : { status: response.status }
  })

/** Whether another attempt may help. */
export const retryable = (error: AttemptError): boolean =>
  error._tag !== "Status" || isRetryableStatus(error.status)
