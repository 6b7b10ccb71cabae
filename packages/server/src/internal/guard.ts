/**
 * What every request passes before any route: its Host and Origin must be this server's (a web
 * page elsewhere, or a DNS name rebound to 127.0.0.1, is refused), and whatever goes wrong
 * after is a typed JSON body: a malformed parameter names the field, an unknown route is a 404,
 * a defect a 500 with no stack trace (logged here instead).
 */
import { HttpApiError, type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Option, Predicate, Redacted } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { BadRequest, Forbidden, InternalError, NotFound, Unauthorized } from "../ApiError.js"

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest()

/** Whether `given` is the token, in time that does not depend on where they differ (both are hashed to one length first). */
export const tokenMatches = (given: Redacted.Redacted, token: Redacted.Redacted): boolean => matcher(token)(given)

/** `tokenMatches` against one `token`, its digest made once. */
export const matcher = (token: Redacted.Redacted): (given: Redacted.Redacted) => boolean => {
  const expected = digest(Redacted.value(token))
  return (given) => timingSafeEqual(digest(Redacted.value(given)), expected)
}

/** The Host header values this server answers: its listen host, 127.0.0.1 and localhost, with its port, and any allowed. */
export const hostsOf = (listen: string, port: number, allowed: ReadonlyArray<string>): ReadonlySet<string> => {
  const hosts = new Set<string>()
  for (const entry of [listen, "127.0.0.1", "localhost", ...allowed].map((name) => name.toLowerCase())) {
    // `name:port` and `[v6]:port` stand as given; a bare name or address gets this server's port.
    if (/^[^:]+:\d+$/.test(entry) || /^\[[^\]]+\]:\d+$/.test(entry)) {
      hosts.add(entry)
      continue
    }
    const name = entry.includes(":") && !entry.startsWith("[") ? `[${entry}]` : entry
    hosts.add(`${name}:${port}`)
    if (port === 80) hosts.add(name)
  }
  return hosts
}

/** The Origins of this server's own pages: its hosts, over http or https. */
export const originsOf = (hosts: ReadonlySet<string>): ReadonlySet<string> =>
  new Set([...hosts].flatMap((host) => [`http://${host}`, `https://${host}`]))

/** A parameter, path or header that did not decode, as the field it concerns. */
const fromDecodeError = (error: HttpApiError.HttpApiDecodeError): BadRequest => {
  const issue = error.issues[0]
  const field = issue === undefined || issue.path.length === 0 ? "request" : issue.path.map(String).join(".")
  return new BadRequest({ field, message: `${field}: ${issue?.message ?? error.message}` })
}

/** The middleware around every route. */
export const middleware = (allowed: { readonly hosts: ReadonlySet<string>; readonly origins: ReadonlySet<string> }) =>
(app: HttpApp.Default): HttpApp.Default<Forbidden | BadRequest | NotFound | InternalError> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const host = request.headers["host"]?.toLowerCase()
    if (host === undefined || !allowed.hosts.has(host)) {
      return yield* new Forbidden({ message: `this server does not answer for host ${JSON.stringify(host ?? "")}` })
    }
    const origin = request.headers["origin"]
    if (origin !== undefined && !allowed.origins.has(origin.toLowerCase())) {
      return yield* new Forbidden({ message: `requests from origin ${JSON.stringify(origin)} are refused` })
    }
    return yield* app
  }).pipe(
    // The router's own failures are untyped here; the API's typed errors pass on to its encoder.
    Effect.catchAllCause((cause): HttpApp.Default<Forbidden | BadRequest | NotFound | InternalError> => {
      const failure = Cause.failureOption<unknown>(cause)
      if (Option.isSome(failure)) {
        const error = failure.value
        if (error instanceof HttpApiError.HttpApiDecodeError) return Effect.fail(fromDecodeError(error))
        // RFC 9110: a 401 names the scheme it wants, in a header the error's schema cannot add.
        if (error instanceof Unauthorized) {
          return Effect.succeed(HttpServerResponse.unsafeJson({ _tag: error._tag, message: error.message }, {
            status: 401,
            headers: { "www-authenticate": "Bearer realm=\"rx\"" }
          }))
        }
        if (Predicate.isTagged(error, "RouteNotFound")) {
          return Effect.flatMap(
            HttpServerRequest.HttpServerRequest,
            (request) => new NotFound({ message: `no route ${request.method} ${request.url.split("?")[0] ?? ""}` })
          )
        }
        return Effect.failCause(cause)
      }
      if (Option.isSome(Cause.dieOption(cause))) {
        return Effect.zipRight(
          Effect.logError("a request failed unexpectedly", cause),
          new InternalError({ message: "the server failed unexpectedly; its log says why" })
        )
      }
      return Effect.failCause(cause)
    })
  )
