/**
 * `http_fetch {url, method?, headers?, body?}`: one HTTP(S) request through @effect/platform's
 * HttpClient (Node), redirects followed by rx itself (at most `httpMaxRedirects`, default 5).
 *
 * Addresses that are not the public internet (loopback, link-local, private, unique-local,
 * carrier-grade NAT, multicast, unspecified, and IPv4 addresses inside IPv6 forms) are refused
 * unless `httpAllow` lists the host name, the address or a CIDR range holding it. The check runs
 * after name resolution, on every address the name resolves to, and again for every redirect;
 * the connection then goes to the addresses that were checked (the client's `lookup` returns
 * them), so a second DNS answer cannot rebind the name to another address.
 *
 * Endpoints the config's `httpDeny` lists (`rx serve` lists its own, so a goal never talks to the
 * server that runs it) are refused whatever `httpAllow` says, by name and by every address the
 * name resolves to, redirects included; one on a loopback or unspecified host covers every
 * address of this machine at its port.
 *
 * The whole fetch times out after `httpTimeoutMs` (default 30 s); at most `httpMaxBytes` of the
 * body (default 256 KiB) are read, the rest is dropped and `truncated` set. Binary bodies are
 * reported, not returned. A 4xx or 5xx status is a result, not an error.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Tool } from "@rx/kernel"
import { Context, Duration, Effect, Layer, Schema, type Scope, Stream } from "effect"
import * as Dns from "node:dns"
import * as Os from "node:os"
import type { LookupFunction } from "node:net"
import { ToolsConfig } from "./Config.js"
import * as Ip from "./internal/ip.js"
import * as Text from "./internal/text.js"

export const Method = Schema.Literal("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
export type Method = typeof Method.Type

export const Input = Schema.Struct({
  url: Schema.String.annotations({ description: "http:// or https:// URL." }),
  method: Schema.optional(Method).annotations({ description: "Default GET." }),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  body: Schema.optional(Schema.String).annotations({ description: "Request body (not for GET or HEAD)." })
})
export type Input = typeof Input.Type

export const Output = Schema.Struct({
  /** The URL asked for. */
  url: Schema.String,
  /** The URL that answered, after redirects. */
  final_url: Schema.String,
  status: Schema.Int,
  headers: Schema.Record({ key: Schema.String, value: Schema.String }),
  content_type: Schema.NullOr(Schema.String),
  /** The body as text; empty when binary. */
  body: Schema.String,
  binary: Schema.Boolean,
  /** Bytes of body returned (or, when binary, read). */
  body_bytes: Schema.Int,
  /** True when the body was longer than the cap. */
  truncated: Schema.Boolean,
  /** The URLs redirected to, in order. */
  redirects: Schema.Array(Schema.String)
})
export type Output = typeof Output.Type

/** The address a URL leads to may not be fetched. */
export class AddressRefused extends Schema.TaggedError<AddressRefused>()("@rx/tools/AddressRefused", {
  url: Schema.String,
  host: Schema.String,
  address: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `fetching ${this.url} is refused: ${this.host} is ${this.address}, a ${this.reason} address; only public addresses may be fetched unless the tools config's httpAllow lists the host, the address or its range`
  }
}

/** The endpoint a URL leads to is one the tools never reach (`httpDeny`). */
export class EndpointRefused extends Schema.TaggedError<EndpointRefused>()("@rx/tools/EndpointRefused", {
  url: Schema.String,
  host: Schema.String,
  port: Schema.Number,
  denied: Schema.String
}) {
  override get message() {
    return `fetching ${this.url} is refused: ${Ip.formatEndpoint(this.host, this.port)} reaches ${this.denied}, which the tools never fetch whatever the allow-list says (the server running these tools, for rx serve)`
  }
}

/** An `httpDeny` entry for `host` (a name or an address) and `port`: `host:port`, or `[v6]:port`. */
export const endpoint = (host: string, port: number): string => Ip.formatEndpoint(host, port)

/** The addresses of this machine's network interfaces, now. */
const interfaceAddresses = (): ReadonlyArray<Ip.Address> =>
  Object.values(Os.networkInterfaces()).flatMap((list) => list ?? []).flatMap((info) => {
    const parsed = Ip.parse(info.address)
    return parsed === undefined ? [] : [parsed]
  })

/**
 * The `httpDeny` entry that a fetch of `host`, resolved to `addresses`, at `port` reaches, if any:
 * the same name, the same address, or, for an entry on a loopback, unspecified or `localhost`
 * host, any address of this machine (`interfaces` are its own).
 */
export const denial = (
  deny: ReadonlyArray<Ip.Endpoint>,
  host: string,
  addresses: ReadonlyArray<string>,
  port: number,
  interfaces: ReadonlyArray<Ip.Address>
): Ip.Endpoint | undefined => {
  const name = host.toLowerCase().replace(/^\[|\]$/g, "")
  const parsed = [name, ...addresses].flatMap((text) => {
    const address = Ip.parse(text)
    return address === undefined ? [] : [address]
  })
  return deny.find((entry) => {
    if (entry.port !== port) return false
    if (entry.host === name) return true
    const address = Ip.parse(entry.host)
    if (address !== undefined && parsed.some((a) => Ip.same(a, address))) return true
    const local = entry.host === "localhost" || (address !== undefined && Ip.isThisMachine(address, []))
    return local && parsed.some((a) => Ip.isThisMachine(a, interfaces))
  })
}

/** Which non-public hosts and addresses may be fetched. */
export interface Policy {
  readonly hosts: ReadonlySet<string>
  readonly ranges: ReadonlyArray<Ip.Range>
}

/** A policy from allow-list entries: CIDR ranges, addresses, or host names. */
export const policy = (allow: ReadonlyArray<string>): Policy => {
  const hosts = new Set<string>()
  const ranges: Array<Ip.Range> = []
  for (const entry of allow) {
    const range = Ip.parseRange(entry.trim())
    if (range !== undefined) ranges.push(range)
    else hosts.add(entry.trim().toLowerCase().replace(/^\[|\]$/g, ""))
  }
  return { hosts, ranges }
}

/** Why an address of `host` may not be fetched; `undefined` if it may. */
export const refusal = (rules: Policy, host: string, address: string): string | undefined => {
  if (rules.hosts.has(host.toLowerCase())) return undefined
  const parsed = Ip.parse(address)
  if (parsed === undefined) return "unparsable"
  const reason = Ip.classify(parsed)
  if (reason === undefined) return undefined
  return rules.ranges.some((range) => Ip.inRange(parsed, range)) ? undefined : reason
}

const lookupAll = (host: string): Effect.Effect<ReadonlyArray<Dns.LookupAddress>, Tool.ToolError> =>
  Effect.async<ReadonlyArray<Dns.LookupAddress>, Tool.ToolError>((resume) => {
    Dns.lookup(host, { all: true }, (error, addresses) => {
      if (error !== null) resume(Effect.fail(Tool.ToolError.recoverable(`cannot resolve ${host}: ${error.code ?? error.message}`)))
      else resume(Effect.succeed(addresses))
    })
  })

export interface Service {
  readonly fetch: (input: Input) => Effect.Effect<Output, Tool.ToolError>
}

export class HttpFetch extends Context.Tag("@rx/tools/HttpFetch")<HttpFetch, Service>() {}

const redirectStatuses = new Set([301, 302, 303, 307, 308])

/** The content type the caller set, whatever its header's case; text/plain otherwise. */
const contentTypeOf = (headers: Readonly<Record<string, string>>): string =>
  Object.entries(headers).find(([name]) => name.toLowerCase() === "content-type")?.[1] ?? "text/plain"

/** A fetcher with its own HTTP agent, whose name resolution returns only checked addresses. */
export const make: Effect.Effect<Service, never, ToolsConfig | Scope.Scope> = Effect.gen(function*() {
  const config = yield* ToolsConfig
  const rules = policy(config.httpAllow)
  const deny = config.httpDeny.flatMap((entry) => {
    const endpoint = Ip.parseEndpoint(entry)
    return endpoint === undefined ? [] : [endpoint]
  })
  // Host name -> the addresses last checked for it; the agent connects to nothing else.
  const checked = new Map<string, ReadonlyArray<Dns.LookupAddress>>()
  const lookup: LookupFunction = (hostname, options, callback) => {
    const addresses = checked.get(hostname.toLowerCase()) ?? []
    const usable = addresses.filter((a) => options.family === undefined || options.family === 0 || a.family === options.family)
    const first = usable[0]
    if (first === undefined) {
      const error: NodeJS.ErrnoException = new Error(`rx: ${hostname} was not checked before connecting`)
      error.code = "ENOTFOUND"
      callback(error, "", 0)
    } else if (options.all === true) callback(null, usable)
    else callback(null, first.address, first.family)
  }
  const agent = yield* NodeHttpClient.makeAgent({ lookup })
  const client = HttpClient.withScope(yield* NodeHttpClient.make.pipe(Effect.provideService(NodeHttpClient.HttpAgent, agent)))

  /** Check where a URL leads before connecting to it. */
  const check = (original: string, url: URL): Effect.Effect<void, Tool.ToolError> =>
    Effect.gen(function*() {
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        return yield* Tool.ToolError.recoverable(`${url.href}: only http and https URLs can be fetched`)
      }
      const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase()
      const refuse = (address: string, reason: string) => {
        const error = new AddressRefused({ url: original, host, address, reason })
        return Effect.fail(Tool.ToolError.recoverable(error.message, { _tag: error._tag, url: original, host, address, reason }))
      }
      const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
      const literal = Ip.parse(host) !== undefined
      const addresses = literal ? [] : yield* lookupAll(host)
      const denied = deny.length === 0 ? undefined : denial(deny, host, addresses.map((a) => a.address), port, interfaceAddresses())
      if (denied !== undefined) {
        const error = new EndpointRefused({ url: original, host, port, denied: Ip.formatEndpoint(denied.host, denied.port) })
        return yield* Tool.ToolError.recoverable(error.message, { _tag: error._tag, url: original, host, port, denied: error.denied })
      }
      if (literal) {
        const reason = refusal(rules, host, host)
        return reason === undefined ? undefined : yield* refuse(host, reason)
      }
      for (const { address } of addresses) {
        const reason = refusal(rules, host, address)
        if (reason !== undefined) return yield* refuse(address, reason)
      }
      // Bounded: a long run that fetches many hosts keeps only recent answers.
      if (checked.size >= 1_000) checked.clear()
      checked.set(host, addresses)
    })

  const fetch = (input: Input): Effect.Effect<Output, Tool.ToolError> =>
    Effect.gen(function*() {
      let url = yield* Effect.try({
        try: () => new URL(input.url),
        catch: () => Tool.ToolError.recoverable(`"${input.url}" is not a valid URL`)
      })
      let method: Method = input.method ?? "GET"
      if ((method === "GET" || method === "HEAD") && input.body !== undefined) {
        return yield* Tool.ToolError.recoverable(`a ${method} request cannot have a body; use POST or PUT`)
      }
      let body = input.body
      let headers: Record<string, string> = { ...input.headers }
      const redirects: Array<string> = []
      while (true) {
        yield* check(input.url, url)
        const current = url
        const request = HttpClientRequest.make(method)(current, { headers }).pipe(
          (req) => (body === undefined ? req : HttpClientRequest.bodyText(req, body, contentTypeOf(headers)))
        )
        const answer = yield* Effect.scoped(Effect.gen(function*() {
          const response = yield* client.execute(request)
          const location = response.headers["location"]
          if (redirectStatuses.has(response.status) && location !== undefined) {
            return { _tag: "Redirect" as const, status: response.status, location }
          }
          const chunks: Array<Uint8Array> = []
          let kept = 0
          let truncated = false
          if (method !== "HEAD") {
            yield* Stream.runForEachWhile(response.stream, (chunk) =>
              Effect.sync(() => {
                const room = config.httpMaxBytes - kept
                if (chunk.length > room) {
                  chunks.push(chunk.subarray(0, room))
                  kept += room
                  truncated = true
                  return false
                }
                chunks.push(chunk)
                kept += chunk.length
                return true
              }))
          }
          return { _tag: "Done" as const, response, bytes: Buffer.concat(chunks), truncated }
        }))
        if (answer._tag === "Redirect") {
          if (redirects.length >= config.httpMaxRedirects) {
            return yield* Tool.ToolError.recoverable(
              `${input.url}: more than ${config.httpMaxRedirects} redirects`,
              { redirects }
            )
          }
          const next = yield* Effect.try({
            try: () => new URL(answer.location, current),
            catch: () => Tool.ToolError.recoverable(`${current.href} redirected to an invalid URL: ${answer.location}`)
          })
          if (answer.status === 303 || ((answer.status === 301 || answer.status === 302) && method === "POST")) {
            method = method === "HEAD" ? "HEAD" : "GET"
            body = undefined
          }
          if (next.origin !== current.origin) {
            // Credentials are for the origin they were given to.
            headers = Object.fromEntries(
              Object.entries(headers).filter(([name]) => !/^(authorization|cookie|proxy-authorization)$/i.test(name))
            )
          }
          redirects.push(next.href)
          url = next
          continue
        }
        const { bytes, response, truncated } = answer
        const contentType = response.headers["content-type"] ?? null
        const binary = bytes.includes(0) ||
          (contentType !== null && /^(image|audio|video)\/|octet-stream|zip|pdf/i.test(contentType)) ||
          (!truncated && Text.isBinary(bytes))
        return {
          url: input.url,
          final_url: current.href,
          status: response.status,
          headers: { ...response.headers },
          content_type: contentType,
          body: binary ? "" : Text.decodeLenient(bytes),
          binary,
          body_bytes: bytes.length,
          truncated,
          redirects
        }
      }
    }).pipe(
      Effect.catchTags({
        RequestError: (error) => Effect.fail(Tool.ToolError.recoverable(`request to ${input.url} failed: ${error.message}`)),
        ResponseError: (error) => Effect.fail(Tool.ToolError.recoverable(`response from ${input.url} failed: ${error.message}`))
      }),
      Effect.timeoutFail({
        duration: Duration.millis(config.httpTimeoutMs),
        onTimeout: () => Tool.ToolError.recoverable(`fetching ${input.url} timed out after ${config.httpTimeoutMs} ms`)
      })
    )
  return { fetch }
})

/** The fetcher as a Layer; its HTTP agent lives as long as the Layer. */
export const layer: Layer.Layer<HttpFetch, never, ToolsConfig> = Layer.scoped(HttpFetch, make)

export const tool = Tool.make({
  name: "http_fetch",
  description:
    "Make an HTTP(S) request. Returns status, headers and body (capped; binary bodies are not returned). Redirects are followed. Private, loopback and link-local addresses are refused unless allowed by configuration.",
  input: Input,
  output: Output,
  // A fetch may be a POST; whether a call is safe to repeat cannot be declared per call.
  idempotent: false,
  execute: (input) => Effect.flatMap(HttpFetch, (fetcher) => fetcher.fetch(input))
})
