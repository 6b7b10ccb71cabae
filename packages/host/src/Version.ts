/** The version of rx, fixed when the binary is bundled ("development" in an unbundled build). */
declare const __RX_VERSION__: string | undefined

export const version: string = typeof __RX_VERSION__ === "string" ? __RX_VERSION__ : "development"
