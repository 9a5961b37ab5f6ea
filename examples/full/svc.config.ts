/**
 * A complete example: every collection of the config and every field type.
 * Copy it, replace the project pin with your own (`svc init --project P` prints one), and push.
 */
import {
  boolean,
  date,
  defineConfig,
  defineModel,
  enumField,
  file,
  flexible,
  image,
  json,
  list,
  model,
  number,
  reference,
  richtext,
  select,
  text,
  video,
} from 'svc/config';

export default defineConfig({
  key: 'acme-store',
  name: 'Acme store',
  configType: 'storefront',
  operationBaseUrl: 'https://functions.acme.example/api',
  project: {
    id: 'prj_example',
    tenantId: 'ten_example',
    name: 'Acme store',
    settings: {
      displayName: 'Acme',
      logoUrl: 'https://cdn.acme.example/logo.svg',
      primaryColor: '#0055ff',
      fromName: 'Acme',
      replyTo: 'hello@acme.example',
      supportEmail: 'support@acme.example',
      appBaseUrl: 'https://acme.example',
      customerWelcomeEmailEnabled: true,
      customerSignupEnabled: true,
      customerPasswordEnabled: true,
      customerOtpEnabled: false,
    },
  },
  models: [
    defineModel({
      key: 'category',
      name: 'Category',
      versioned: false,
      fields: [text({ key: 'title', label: 'Title', required: true, queryable: true })],
    }),
    defineModel({
      key: 'address',
      name: 'Address',
      fields: [text({ key: 'street', label: 'Street' }), text({ key: 'city', label: 'City' })],
    }),
    defineModel({
      key: 'product',
      name: 'Product',
      fields: [
        text({ key: 'title', label: 'Title', required: true, queryable: true, placeholder: 'Product name' }),
        text({ key: 'slug', label: 'Slug', required: true, queryable: true }),
        text({ key: 'summary', label: 'Summary', widget: 'textarea' }),
        richtext({ key: 'body', label: 'Body' }),
        flexible({ key: 'sections', label: 'Sections' }),
        number({ key: 'price', label: 'Price', queryable: true }),
        boolean({ key: 'inStock', label: 'In stock', queryable: true }),
        date({ key: 'launchedAt', label: 'Launch date', queryable: true }),
        enumField({
          key: 'size',
          label: 'Size',
          options: [
            { value: 's', label: 'Small' },
            { value: 'm', label: 'Medium' },
            { value: 'l', label: 'Large' },
          ],
          default: 'm',
        }),
        select({ key: 'category', label: 'Category', optionModelKey: 'category', multiple: true }),
        reference({ key: 'related', label: 'Related product', config: { modelKey: 'product' } }),
        model({ key: 'warehouse', label: 'Warehouse address', config: { modelKey: 'address' } }),
        image({ key: 'hero', label: 'Hero image' }),
        video({ key: 'demo', label: 'Demo video' }),
        file({ key: 'manual', label: 'Manual (PDF)' }),
        list({ key: 'tags', label: 'Tags', itemType: 'text' }),
        json({ key: 'specs', label: 'Specifications' }),
        text({ key: 'reviewNote', label: 'Customer note', access: { write: ['self', 'admin'] } }),
      ],
      lookups: [{ keyBy: ['slug'] }],
    }),
  ],
  operations: [
    {
      key: 'syncInventory',
      name: 'Sync inventory',
      description: 'Pulls stock levels from the ERP',
      endpoint: '/inventory/sync',
    },
    { key: 'sendDigest', name: 'Send digest', endpoint: 'https://mail.acme.example/digest' },
  ],
  hooks: [
    {
      key: 'productChanged',
      name: 'Product changed',
      event: 'RECORD_UPDATED',
      operationKey: 'syncInventory',
      filter: { modelKey: 'product' },
    },
  ],
  schedules: [{ operationKey: 'sendDigest', cron: '0 8 * * MON-FRI', timezone: 'Europe/Berlin', enabled: true }],
  segments: [
    {
      key: 'bigSpenders',
      name: 'Big spenders',
      description: 'Customers who spent more than 1000',
      isActive: true,
      rules: {
        type: 'condition',
        left: { type: 'field', path: 'customer.totalSpent' },
        operator: 'greater_than',
        right: { type: 'literal', value: 1000 },
      },
    },
  ],
  authProviders: [
    {
      key: 'google',
      name: 'Google',
      type: 'oauth2',
      config: {
        issuer: 'https://accounts.google.com',
        clientId: 'acme-google',
        clientSecretLabel: 'googleClientSecret',
        allowedDomains: ['acme.example'],
      },
      enabled: true,
      isDefault: true,
      priority: 1,
    },
  ],
  relyingParties: [
    {
      kind: 'customer',
      clientId: 'storefront',
      name: 'Acme storefront',
      redirectUris: ['https://acme.example/auth/callback'],
      allowedScopes: ['openid', 'profile'],
      loginMethods: { password: true, otp: true, disabledProviders: [] },
      customDomains: ['login.acme.example'],
      postLoginUrl: 'https://acme.example/account',
      allowedOrigins: ['https://acme.example', 'https://shop.acme.example:8443'],
    },
  ],
  placements: [
    {
      type: 'main-editor',
      url: 'https://apps.acme.example/seo',
      modelKeys: ['product'],
      tabName: 'SEO',
      hideContentTab: false,
    },
  ],
  apiKeys: [
    {
      name: 'backend',
      keyType: 'secret',
      envVar: 'SVC_SECRET_KEY',
      scopes: ['records:read', 'records:write'],
      allowedFileTypes: ['image/*', 'application/pdf'],
    },
    {
      name: 'website',
      keyType: 'public',
      envVar: 'SVC_PUBLIC_KEY',
      scopes: ['records:read'],
      allowedModels: ['product', 'category'],
    },
  ],
  customerRoles: [
    { key: 'member', name: 'Member', permissions: ['records:read'], isDefault: true },
    { key: 'reviewer', name: 'Reviewer', permissions: ['self:*', 'operations:execute:sendDigest'] },
  ],
  apps: {
    shopify: {
      source: 'https://apps.acme.example/shopify/manifest.json',
      settings: { shop: 'acme' },
      mappings: {
        sources: { products: { toModel: 'product', naturalKey: 'handle', fields: { title: 'title', handle: 'slug' } } },
        sinks: {},
        placementFields: { seo: { model: 'product', field: 'summary' } },
      },
    },
  },
  designTokens: {
    color: {
      $type: 'color',
      brand: { $value: '#0055ff' },
      accent: { $value: '{color.brand}' },
    },
    font: {
      size: {
        $type: 'dimension',
        display1: { $value: '48px' },
        body: { $value: '16px' },
      },
      heading: { $type: 'dimension', $value: '{font.size.display1}' },
    },
  },
});
