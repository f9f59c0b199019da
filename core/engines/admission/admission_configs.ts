/**
 * Managed webhook configurations (`settings.admission.managed`): one
 * ValidatingWebhookConfiguration and one MutatingWebhookConfiguration named after the setting,
 * with one webhook entry per admission handler of that kind. They are created when absent and
 * their `webhooks` list is overwritten whenever the server yields a new client config or the
 * served resources change (a CRD appears); on a graceful exit, only the persistent handlers'
 * entries are left.
 *
 * Entries follow Kopf's: name `<handler id>.<managed name>`, the handler id appended to the URL
 * or service path, rules per served resource, label filters as `objectSelector`,
 * `failurePolicy` from `ignoreFailures`, `sideEffects` from `sideEffects`, 30 s timeout.
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import { ApiError } from "../../client/errors.ts";
import { ABSENT, type MetaFilter, PRESENT } from "../../intents/filters.ts";
import type { Registration, WebhookHandler, WebhookKind } from "../../intents/handlers.ts";
import type { OperatorRegistry } from "../../intents/registries.ts";
import { resolveSelector } from "../../intents/selectors.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import type { WebhookClientConfig } from "../../structs/admission.ts";
import type { JsonObject } from "../../structs/dicts.ts";
import type { Resource } from "../../structs/resources.ts";

/** The webhook configuration resources, by the kind of handlers they hold. */
export const WEBHOOK_CONFIGURATIONS: Readonly<Record<WebhookKind, Resource>> = {
  validating: configurationResource("validatingwebhookconfigurations", "Validating"),
  mutating: configurationResource("mutatingwebhookconfigurations", "Mutating"),
};

function configurationResource(plural: string, prefix: string): Resource {
  return {
    group: "admissionregistration.k8s.io",
    version: "v1",
    plural,
    kind: `${prefix}WebhookConfiguration`,
    singular: plural.slice(0, -1),
    namespaced: false,
    verbs: [],
    shortNames: [],
    categories: [],
    subresources: [],
    preferred: true,
  };
}

/**
 * The webhook name of a handler: its id with `/` → `.` and `_` → `-`, any other character that
 * a DNS name cannot hold as `x<hex>`, then `.<suffix>`.
 *
 * @param id The handler id.
 * @param suffix The managed configuration name.
 * @returns The name, e.g. `validate1.auto.kopf.dev`.
 */
export function webhookName(id: string, suffix: string | null): string {
  const name = id.replaceAll("/", ".").replaceAll("_", "-").replace(
    /[^A-Za-z0-9.-]/g,
    (c) => `x${c.codePointAt(0)!.toString(16).padStart(2, "0")}`,
  );
  return suffix ? `${name}.${suffix}` : name;
}

/**
 * Label filters as a server-side `objectSelector` (callbacks cannot be expressed: they are
 * checked when the review arrives).
 *
 * @param labels The handler's label filters.
 * @returns The selector, or `undefined` when there is nothing to select by.
 */
export function labelSelector(labels: MetaFilter | undefined): JsonObject | undefined {
  const expressions = Object.entries(labels ?? {}).flatMap(([key, value]) =>
    typeof value === "function"
      ? []
      : value === PRESENT
      ? [{ key, operator: "Exists" }]
      : value === ABSENT
      ? [{ key, operator: "DoesNotExist" }]
      : [{ key, operator: "In", values: [String(value)] }]
  );
  return expressions.length ? { matchExpressions: expressions } : undefined;
}

/**
 * A client config with the handler id appended to its URL path or service path.
 *
 * @param config The server's client config.
 * @param id The handler id.
 * @returns A new config.
 */
export function withHandlerId(config: WebhookClientConfig, id: string): WebhookClientConfig {
  const segment = encodeURIComponent(id);
  const result: { -readonly [K in keyof WebhookClientConfig]: WebhookClientConfig[K] } = {
    ...config,
  };
  if (config.url !== undefined) {
    const url = new URL(config.url);
    url.pathname = `${url.pathname.replace(/\/+$/, "")}/${segment}`;
    result.url = url.toString();
  }
  if (config.service !== undefined) {
    result.service = { ...config.service, path: `${config.service.path ?? ""}/${segment}` };
  }
  return result;
}

/** Options of {@link buildWebhooks}. */
export interface BuildWebhooksOptions {
  /** Discovered resources, to turn selectors into rules. */
  readonly resources: readonly Resource[];
  /** The managed configuration name, appended to each webhook name. */
  readonly nameSuffix: string | null;
  /** The server's client config. */
  readonly clientConfig: WebhookClientConfig;
  /** Only the persistent handlers (what stays after exit). @default false */
  readonly persistentOnly?: boolean;
}

/**
 * The `webhooks` entries of a managed configuration, one per handler.
 *
 * @param registrations Admission handlers with their selectors (all of one kind).
 * @param options Resources, name suffix, client config.
 * @returns The entries.
 */
export function buildWebhooks(
  registrations: readonly Registration<WebhookHandler>[],
  options: BuildWebhooksOptions,
): JsonObject[] {
  return registrations.filter(({ handler }) => !options.persistentOnly || handler.persistent)
    .map(({ selector, handler }) => {
      const objectSelector = labelSelector(handler.labels);
      const plurals = (plural: string) =>
        handler.subresource === undefined
          ? [plural]
          // Kubernetes' `plural/*` matches subresources only; "*" means the body too.
          : handler.subresource === "*"
          ? [plural, `${plural}/*`]
          : [`${plural}/${handler.subresource}`];
      return {
        name: webhookName(handler.id, options.nameSuffix),
        sideEffects: handler.sideEffects ? "NoneOnDryRun" : "None",
        failurePolicy: handler.ignoreFailures ? "Ignore" : "Fail",
        matchPolicy: "Equivalent",
        rules: resolveSelector(selector, options.resources).resources.map((resource) => ({
          apiGroups: [resource.group],
          apiVersions: [resource.version],
          resources: plurals(resource.plural),
          operations: handler.operations ? [...handler.operations] : ["*"],
          scope: "*",
        })),
        ...(objectSelector ? { objectSelector } : {}),
        clientConfig: withHandlerId(options.clientConfig, handler.id) as JsonObject,
        timeoutSeconds: 30,
        admissionReviewVersions: ["v1", "v1beta1"],
      };
    });
}

/** What {@link manageConfigurations} needs. */
export interface ManageConfigurationsDeps {
  /** The API client. */
  readonly client: KubeClient;
  /** The handlers. */
  readonly registry: OperatorRegistry;
  /** `admission.managed` is read from here. */
  readonly settings: OperatorSettings;
  /** The operator's logger. */
  readonly logger: Logger;
  /** The client configs the webhook server yields. */
  readonly configs: AsyncIterable<WebhookClientConfig>;
  /** Aborted when the operator stops. */
  readonly signal: AbortSignal;
  /** Called after the first client config is in place. */
  readonly onConfigured?: (() => void) | undefined;
}

/**
 * Consumes the server's client configs until it stops, keeping the managed configurations in
 * sync; then leaves only the persistent entries in them (sharded replicas leave them all, since
 * the other replicas serve them). Without `admission.managed`, only consumes the configs.
 *
 * @param deps Client, handlers, settings, configs, signal.
 * @returns Resolves when the server has stopped and the configurations are cleaned up.
 * @throws {ApiError} when a configuration cannot be created or patched (e.g. missing RBAC).
 */
export async function manageConfigurations(deps: ManageConfigurationsDeps): Promise<void> {
  const managed = deps.settings.admission.managed;
  const logger = deps.logger.child(["kopf", "admission"]);
  let current: WebhookClientConfig | undefined;
  let chain: Promise<void> = Promise.resolve();
  let failure: unknown;
  const reconfigure = (persistentOnly: boolean, signal: AbortSignal) => {
    if (!managed || !current) return chain;
    const config = current;
    chain = chain.then(() => applyAll(deps, managed, config, persistentOnly, logger, signal))
      .catch((error) => {
        // Stopping while writing them: not a failure; the clean-up below writes them again.
        if (signal.aborted) return;
        logger.error(`Cannot configure the webhooks in ${managed}: ${error}`);
        failure ??= error;
      });
    return chain;
  };
  // A CRD that appears later gets its rules as soon as discovery knows it.
  const unsubscribe = managed
    ? deps.client.discovery.onChange(() => void reconfigure(false, deps.signal))
    : undefined;
  try {
    for await (const config of deps.configs) {
      current = config;
      logger.debug(`Webhook server endpoint: ${config.url ?? JSON.stringify(config.service)}`);
      await reconfigure(false, deps.signal);
      if (failure) throw failure;
      deps.onConfigured?.();
    }
  } finally {
    unsubscribe?.();
    if (managed && current && deps.settings.sharding.enabled) {
      // Sharded replicas all serve the webhooks: one leaving must not remove what the others
      // still serve (configure them through one Service, so that all replicas write the same).
      logger.info(
        `Leaving the webhooks in ${managed} as they are: other sharded replicas serve them.`,
      );
    } else if (managed && current) {
      // The operator's signal is aborted by now: clean up with a bounded one of our own.
      const signal = AbortSignal.timeout(Math.max(deps.settings.process.gracePeriod, 5) * 1000);
      await reconfigure(true, signal);
    }
  }
}

async function applyAll(
  deps: ManageConfigurationsDeps,
  managed: string,
  config: WebhookClientConfig,
  persistentOnly: boolean,
  logger: Logger,
  signal: AbortSignal,
): Promise<void> {
  const resources = persistentOnly ? [] : await deps.client.discovery.resources(signal);
  for (const kind of ["validating", "mutating"] as const) {
    const registrations = deps.registry.webhooks(kind);
    if (registrations.length === 0) continue;
    const resource = WEBHOOK_CONFIGURATIONS[kind];
    const webhooks = persistentOnly
      ? await persistentEntries(deps, resource, managed, registrations, signal)
      : buildWebhooks(registrations, { resources, nameSuffix: managed, clientConfig: config });
    if (webhooks === undefined) continue;
    logger.info(
      persistentOnly
        ? `Removing the non-persistent ${kind} webhooks from ${managed}.`
        : `Reconfiguring the ${kind} webhook configuration ${managed}.`,
    );
    try {
      await deps.client.api.patch(resource, managed, { webhooks }, { signal });
    } catch (error) {
      if (!(error instanceof ApiError && error.code === 404) || persistentOnly) throw error;
      await deps.client.api.create(resource, {
        apiVersion: "admissionregistration.k8s.io/v1",
        kind: resource.kind,
        metadata: { name: managed },
        webhooks,
      }, { signal });
    }
  }
}

/** The live entries of persistent handlers (kept as they are), or undefined if nothing changes. */
async function persistentEntries(
  deps: ManageConfigurationsDeps,
  resource: Resource,
  managed: string,
  registrations: readonly Registration<WebhookHandler>[],
  signal: AbortSignal,
): Promise<JsonObject[] | undefined> {
  let live: JsonObject[];
  try {
    const object = await deps.client.api.get(resource, managed, { signal });
    live = (object.webhooks ?? []) as JsonObject[];
  } catch (error) {
    if (error instanceof ApiError && error.code === 404) return undefined;
    throw error;
  }
  const ours = new Set(registrations.map(({ handler }) => webhookName(handler.id, managed)));
  const keep = new Set(
    registrations.filter(({ handler }) => handler.persistent).map(({ handler }) =>
      webhookName(handler.id, managed)
    ),
  );
  const kept = live.filter((entry) =>
    !ours.has(String(entry.name)) || keep.has(String(entry.name))
  );
  return kept.length === live.length ? undefined : kept;
}
