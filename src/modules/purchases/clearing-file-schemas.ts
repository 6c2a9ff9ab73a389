import { type Static, Type } from "typebox";
import { MessageId } from "./schemas.ts";

/**
 * A clearing file as the processor uploads it: NDJSON (Content-Type: application/x-ndjson), a
 * first line `{"file_id": "..."}`, then one CLEARING or RETURN message per line, as the messages
 * route takes each. NDJSON rather than one JSON object with a `lines` array: production runs with
 * a V8 heap of 128 MB (package.json's serve script), and a 100,000-line array parsed whole (its
 * text, then its objects, both in the heap at once) took the heap to that limit; lines read one at
 * a time from the body's bytes (outside the heap) keep only what each line decided. And a line
 * that is not valid JSON then refuses only itself, not the file.
 */
export const ClearingFileHeader = Type.Object(
  {
    file_id: Type.String({
      ...MessageId,
      description: "The processor's id of the file: a repeat answers the first report again",
    }),
  },
  { additionalProperties: false },
);
export type ClearingFileHeaderType = Static<typeof ClearingFileHeader>;

export const ndjsonContentType = "application/x-ndjson";

const Cents = (description: string) => Type.Integer({ description });

const Tally = (description: string) =>
  Type.Object({ count: Type.Integer(), amount: Cents("MXN centavos") }, { description });

const LineRef = Type.Object({
  line: Type.Integer({ description: "The line's number in the upload (the file_id line is line 1)" }),
  message_id: Type.Union([Type.String(), Type.Null()]),
});

export const ClearingFileReportData = Type.Object({
  file_id: Type.String(),
  lines: Type.Integer({ description: "Message lines in the file (the file_id line and blank lines aside)" }),
  lines_sha256: Type.String({
    description: "SHA-256 of the message lines as sent (each ending in \\n): what a repeat must match",
  }),
  matched: Tally("Clearings of an authorization: its hold settled"),
  force_posts: Tally("Clearings naming no authorization, posted as force posts"),
  returns: Tally("Refunds credited to cards"),
  net: Cents("matched + force_posts - returns: what the file adds to what the issuer owes the network"),
  over_tolerance: Type.Object(
    {
      count: Type.Integer(),
      amount: Cents("MXN centavos"),
      lines: Type.Array(
        Type.Object({ ...LineRef.properties, authorization_id: Type.Union([Type.String(), Type.Null()]) }),
      ),
    },
    { description: "Matched clearings beyond the authorized amount and its tip rule: posted, to dispute" },
  ),
  duplicates: Type.Object(
    { count: Type.Integer(), amount: Cents("MXN centavos"), lines: Type.Array(LineRef) },
    { description: "Lines whose message_id was processed before (an earlier line, or another call)" },
  ),
  refused: Type.Object(
    {
      count: Type.Integer(),
      lines: Type.Array(Type.Object({ ...LineRef.properties, code: Type.Integer(), message: Type.String() })),
    },
    { description: "Lines that moved nothing, each with the catalog error that refused it" },
  ),
  processed_at: Type.String(),
});
export type ClearingFileReport = Static<typeof ClearingFileReportData>;
