/** The characters a Redis Cluster hash tag cannot hold, and `%`, which escapes them. */
const TAG_SPECIALS = /[%{}]/g
const ESCAPES: Readonly<Record<string, string>> = { '%': '%25', '{': '%7B', '}': '%7D' }
const escape = (special: string) => ESCAPES[special] as string

/**
 * `text` as a Redis Cluster hash tag, `{TEXT}`: the cluster hashes only what is between the first `{` and the
 * first `}` after it (the cluster specification, hash tags), so every key that holds this tag first is in one
 * slot. `%`, `{` and `}` are percent-encoded, so the tag is all of `text`, and no two texts make one tag. An
 * empty `text` makes an empty tag, which the cluster ignores: give a text that is never empty.
 */
export function hashTag(text: string): string {
  return `{${text.replace(TAG_SPECIALS, escape)}}`
}
