/**
 * Handler filters: by labels, annotations, field values, field changes, and arbitrary callbacks.
 * Port of Kopf's example 11-filtering-handlers.
 *
 * With `examples/obj.yaml` (label `somelabel: somevalue`, annotation
 * `someannotation: somevalue`, `spec.field: value`), the handlers whose messages end with
 * "matching", "present", "absent", "satisfied" run on creation, the ones saying "not satisfied"
 * and "mismatch" do not. Changing `spec.field` from `value` to `changed` runs the update
 * handler.
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/11-filtering-handlers/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 *   kubectl patch kex kopf-example-1 --type merge -p '{"spec": {"field": "changed"}}'
 */
import { ABSENT, type ChangingContext, daemon, on, PRESENT } from "../../mod.ts";

// Value callbacks get the value (undefined when absent) and the handler's context.
function say_yes(value: unknown, { spec }: ChangingContext): boolean {
  return value === "somevalue" && spec.field !== undefined;
}

function say_no(value: unknown, { spec }: ChangingContext): boolean {
  return value === "somevalue" && spec.field === "not-this-value-for-sure";
}

on.create(
  "kopfexamples",
  { labels: { somelabel: "somevalue" } },
  function create_with_labels_matching({ logger }) {
    logger.info("Label is matching.");
  },
);

on.create(
  "kopfexamples",
  { labels: { somelabel: PRESENT } },
  function create_with_labels_present({ logger }) {
    logger.info("Label is present.");
  },
);

on.create(
  "kopfexamples",
  { labels: { nonexistent: ABSENT } },
  function create_with_labels_absent({ logger }) {
    logger.info("Label is absent.");
  },
);

on.create(
  "kopfexamples",
  { labels: { somelabel: say_yes } },
  function create_with_labels_callback_matching({ logger }) {
    logger.info("Label callback matching.");
  },
);

on.create(
  "kopfexamples",
  { annotations: { someannotation: "somevalue" } },
  function create_with_annotations_matching({ logger }) {
    logger.info("Annotation is matching.");
  },
);

on.create(
  "kopfexamples",
  { annotations: { someannotation: PRESENT } },
  function create_with_annotations_present({ logger }) {
    logger.info("Annotation is present.");
  },
);

on.create(
  "kopfexamples",
  { annotations: { nonexistent: ABSENT } },
  function create_with_annotations_absent({ logger }) {
    logger.info("Annotation is absent.");
  },
);

on.create(
  "kopfexamples",
  { annotations: { someannotation: say_no } },
  function create_with_annotations_callback_matching({ logger }) {
    logger.info("Annotation callback mismatch.");
  },
);

on.create(
  "kopfexamples",
  { when: () => true },
  function create_with_filter_satisfied({ logger }) {
    logger.info("Filter satisfied.");
  },
);

on.create(
  "kopfexamples",
  { when: () => false },
  function create_with_filter_not_satisfied({ logger }) {
    logger.info("Filter not satisfied.");
  },
);

on.create(
  "kopfexamples",
  { field: "spec.field", value: "value" },
  function create_with_field_value_satisfied({ logger }) {
    logger.info("Field value is satisfied.");
  },
);

on.create(
  "kopfexamples",
  { field: "spec.field", value: "something-else" },
  function create_with_field_value_not_satisfied({ logger }) {
    logger.info("Field value is not satisfied.");
  },
);

on.create(
  "kopfexamples",
  { field: "spec.field", value: PRESENT },
  function create_with_field_presence_satisfied({ logger }) {
    logger.info("Field presence is satisfied.");
  },
);

on.create(
  "kopfexamples",
  { field: "spec.inexistent", value: PRESENT },
  function create_with_field_presence_not_satisfied({ logger }) {
    logger.info("Field presence is not satisfied.");
  },
);

on.update(
  "kopfexamples",
  { field: "spec.field", old: "value", new: "changed" },
  function update_with_field_change_satisfied({ logger }) {
    logger.info("Field change is satisfied.");
  },
);

// A daemon runs only while the field has the value (filters are re-checked on every event).
daemon(
  "kopfexamples",
  { field: "spec.field", value: "value" },
  async function daemon_with_field({ logger, stopped, sleep }) {
    while (!stopped.aborted) {
      logger.info("Field daemon is satisfied.");
      await sleep(1);
    }
  },
);
