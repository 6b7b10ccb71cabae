/**
 * Glob patterns as regular expressions: `*` (any characters but `/`), `**` (any number of
 * directories), `?`, `[abc]`, `[!abc]`, `{a,b}`. Matching is on `/`-separated relative paths.
 */

const escape = (char: string): string => /[.+^$()|\\\/\]{}[*?]/.test(char) ? `\\${char}` : char

/** Compile a glob; `undefined` if a bracket or brace is left open. */
export const compile = (pattern: string): RegExp | undefined => {
  let out = ""
  let braces = 0
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern.charAt(i)
    if (char === "*") {
      if (pattern.charAt(i + 1) === "*") {
        const atStart = i === 0 || pattern.charAt(i - 1) === "/"
        const atEnd = i + 2 === pattern.length || pattern.charAt(i + 2) === "/"
        if (atStart && atEnd) {
          // `**/` matches zero or more directories; a trailing `**` matches everything below.
          if (i + 2 === pattern.length) out += ".*"
          else {
            out += "(?:[^/]*/)*"
            i++
          }
          i++
          continue
        }
        out += "[^/]*"
        i++
        continue
      }
      out += "[^/]*"
    } else if (char === "?") {
      out += "[^/]"
    } else if (char === "[") {
      const close = pattern.indexOf("]", i + 2)
      if (close === -1) return undefined
      let body = pattern.slice(i + 1, close)
      const negate = body.startsWith("!") || body.startsWith("^")
      if (negate) body = body.slice(1)
      out += `[${negate ? "^/" : ""}${body.replace(/\\/g, "\\\\")}]`
      i = close
    } else if (char === "{") {
      braces++
      out += "(?:"
    } else if (char === "}" && braces > 0) {
      braces--
      out += ")"
    } else if (char === "," && braces > 0) {
      out += "|"
    } else {
      out += escape(char)
    }
  }
  if (braces !== 0) return undefined
  try {
    return new RegExp(`^${out}$`)
  } catch {
    return undefined
  }
}
