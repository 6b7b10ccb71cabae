/**
 * The chain of causes of a failure. Errors from drivers and HTTP clients wrap one another
 * (`SqlError` wraps better-sqlite3's or pg's error, undici wraps a socket error): what a user
 * can act on (a code such as `SQLITE_FULL` or `ECONNREFUSED`, the innermost message) is often
 * a few `cause`s down. The walk is bounded, so a cyclic chain cannot hang it.
 */
import { Predicate } from "effect"

/**
 * `error` and the causes it wraps, outermost first, at most `max` links: each link's `cause`
 * property is the next one, until a link is `null` or `undefined` or has no `cause`.
 */
export const chain = (error: unknown, max = 8): ReadonlyArray<unknown> => {
  const links: Array<unknown> = []
  for (let current: unknown = error; current !== undefined && current !== null && links.length < max;) {
    links.push(current)
    current = Predicate.hasProperty(current, "cause") ? current.cause : undefined
  }
  return links
}

/** The `code` of a link, when it is text (`SQLITE_BUSY`, `ECONNREFUSED`, a SQLSTATE). */
export const codeOf = (link: unknown): string | undefined =>
  Predicate.hasProperty(link, "code") && typeof link.code === "string" ? link.code : undefined

/** The `message` of a link, when it is text. */
export const messageOf = (link: unknown): string | undefined =>
  Predicate.hasProperty(link, "message") && typeof link.message === "string" ? link.message : undefined

/** The first code along the chain that `accept` takes (any code by default). */
export const firstCode = (error: unknown, options?: { readonly max?: number; readonly accept?: (code: string) => boolean }): string | undefined => {
  const accept = options?.accept ?? (() => true)
  for (const link of chain(error, options?.max)) {
    const code = codeOf(link)
    if (code !== undefined && accept(code)) return code
  }
  return undefined
}

/** The innermost non-empty message along the chain, or `String(error)` when no link has one. */
export const innermostMessage = (error: unknown, max?: number): string =>
  chain(error, max).reduce<string>((message, link) => {
    const own = messageOf(link)
    return own !== undefined && own !== "" ? own : message
  }, String(error))
