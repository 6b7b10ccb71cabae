/**
 * Request bodies, read with a bound and decoded with a Schema. The body is read from Node's
 * request directly: past the bound, the rest is discarded (not the connection torn down), so
 * the client still reads its 413.
 */
import type { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, Either, ParseResult, Schema } from "effect"
import { BadRequest, PayloadTooLarge } from "../ApiError.js"

const tooLarge = (limit: number) =>
  new PayloadTooLarge({ limit, message: `the request body is larger than the ${limit} bytes this server accepts` })

/** The body as text, at most `limit` bytes. */
export const text = (request: HttpServerRequest.HttpServerRequest, limit: number): Effect.Effect<string, PayloadTooLarge | BadRequest> =>
  Effect.suspend(() => {
    const declared = Number(request.headers["content-length"] ?? "0")
    if (Number.isFinite(declared) && declared > limit) return Effect.fail(tooLarge(limit))
    const source = NodeHttpServerRequest.toIncomingMessage(request)
    if (source.readableEnded) return Effect.succeed("")
    return Effect.async<string, PayloadTooLarge | BadRequest>((resume) => {
      const chunks: Array<Buffer> = []
      let size = 0
      const cleanup = () => {
        source.off("data", onData).off("end", onEnd).off("error", onError)
      }
      const onData = (chunk: Buffer) => {
        size += chunk.length
        if (size <= limit) return void chunks.push(chunk)
        cleanup()
        // Read and drop the rest, so the response still reaches the client.
        source.resume()
        resume(Effect.fail(tooLarge(limit)))
      }
      const onEnd = () => {
        cleanup()
        resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
      }
      const onError = (error: Error) => {
        cleanup()
        resume(Effect.fail(new BadRequest({ field: "body", message: `the request body could not be read: ${error.message}` })))
      }
      source.on("data", onData).on("end", onEnd).on("error", onError)
      return Effect.sync(cleanup)
    })
  })

/** The first problem of a decoding failure, as the field it concerns and a sentence. */
export const badRequest = (error: ParseResult.ParseError, prefix: ReadonlyArray<PropertyKey> = []): BadRequest => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  const path = [...prefix, ...(issue?.path ?? [])].map(String)
  const field = path.length === 0 ? "body" : path.join(".")
  return new BadRequest({ field, message: `${field}: ${issue?.message ?? "invalid"}` })
}

/** How deep a request body's JSON may nest: rx's requests need a few levels; thousands overflow the decoder's stack. */
export const maxDepth = 64

/** Whether JSON `text` nests arrays and objects deeper than `limit` (brackets inside strings are text). */
export const nestsDeeper = (text: string, limit: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // backslash: the next character is escaped
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return false
}

/**
 * The JSON body decoded with `schema`; unknown fields are refused, so a misspelt option is not
 * silently ignored. A body nested deeper than `maxDepth` is refused before it is parsed.
 */
export const decode = <A, I>(
  request: HttpServerRequest.HttpServerRequest,
  schema: Schema.Schema<A, I>,
  limit: number
): Effect.Effect<A, PayloadTooLarge | BadRequest> =>
  Effect.flatMap(text(request, limit), (body) => {
    if (nestsDeeper(body, maxDepth)) {
      return Effect.fail(new BadRequest({ field: "body", message: `the request body is JSON nested more than ${maxDepth} levels deep; no request of this API needs more than a few` }))
    }
    const json = Either.try({ try: (): unknown => JSON.parse(body === "" ? "{}" : body), catch: (e) => (e instanceof Error ? e.message : String(e)) })
    if (Either.isLeft(json)) return Effect.fail(new BadRequest({ field: "body", message: `the request body is not JSON: ${json.left}` }))
    return decoderOf(schema)(json.right).pipe(Effect.mapError((error) => badRequest(error)))
  })

/** Each schema's decoder, made once (making it looks the schema's parser up). */
const decoders = new WeakMap<Schema.Schema.Any, (input: unknown) => Effect.Effect<unknown, ParseResult.ParseError>>()
const decoderOf = <A, I>(schema: Schema.Schema<A, I>): (input: unknown) => Effect.Effect<A, ParseResult.ParseError> => {
  const made = decoders.get(schema) as ((input: unknown) => Effect.Effect<A, ParseResult.ParseError>) | undefined
  if (made !== undefined) return made
  const decoder = Schema.decodeUnknown(schema, { onExcessProperty: "error" })
  decoders.set(schema, decoder)
  return decoder
}
