//! The walk's tests: shapes from CRD schemas, pod templates from the cell's core types.

use super::*;

fn crd(spec: Value) -> Value {
    json!({"spec": {"group": "g", "names": {"kind": "K"}, "versions": [
        {"name": "v1", "served": true, "storage": true,
         "schema": {"openAPIV3Schema": {"properties": {"spec": spec}}}}]}})
}

#[test]
fn leaves_have_the_shapes_of_their_schemas_and_templates_only_their_metadata() {
    let c = crd(
        json!({"type": "object", "required": ["replicas"], "properties": {
        "replicas": {"type": "integer", "minimum": 0},
        "paused": {"type": "boolean"},
        "selector": {"type": "object", "properties": {
            "matchLabels": {"type": "object"}, "matchExpressions": {"type": "array"}}},
        "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "jobTemplate": {"type": "object", "properties": {
            "metadata": {"type": "object"}, "spec": {"type": "object"}}},
        "updateStrategy": {"type": "object", "properties": {
            "type": {"type": "string", "enum": ["ReCreate", "InPlaceIfPossible"]},
            "maxUnavailable": {"x-kubernetes-int-or-string": true, "anyOf": [
                {"type": "integer"}, {"type": "string"}]},
            "priorities": {"type": "array", "items": {"type": "object", "properties": {
                "weight": {"type": "integer"},
                "patch": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}),
    );
    let got: Vec<(String, Shape, bool)> = leaves(&c, "v1")
        .into_iter()
        .map(|l| (l.path, l.shape, l.required))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "spec.jobTemplate.metadata.annotations".into(),
                Shape::Map,
                false
            ),
            ("spec.jobTemplate.metadata.labels".into(), Shape::Map, false),
            ("spec.paused".into(), Shape::Bool, false),
            (
                "spec.replicas".into(),
                Shape::Integer {
                    minimum: Some(0),
                    maximum: None
                },
                true
            ),
            ("spec.selector".into(), Shape::Selector, false),
            (
                "spec.updateStrategy.finalizers".into(),
                Shape::List(Box::new(Shape::String(vec![]))),
                false
            ),
            ("spec.updateStrategy.labels".into(), Shape::Map, false),
            (
                "spec.updateStrategy.maxUnavailable".into(),
                Shape::IntOrString,
                false
            ),
            (
                "spec.updateStrategy.priorities".into(),
                Shape::Objects(json!({})),
                false
            ),
            (
                "spec.updateStrategy.priorities[0].patch".into(),
                Shape::Free(vec![]),
                false
            ),
            (
                "spec.updateStrategy.priorities[0].weight".into(),
                Shape::Integer {
                    minimum: None,
                    maximum: None
                },
                false
            ),
            (
                "spec.updateStrategy.type".into(),
                Shape::Enum(vec!["ReCreate".into(), "InPlaceIfPossible".into()]),
                false
            ),
        ]
    );
    assert!(leaves(&c, "v2").is_empty());
}

/// A seed whose pod template has one container, `main`.
fn one_container_seed() -> Value {
    json!({"spec": {"template": {"metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "main", "image": "i"}]}}}})
}

/// The shape of the leaf at `p` below `spec.template`, if the walk gave one.
fn template_shape(leaves: &[Leaf], p: &str) -> Option<Shape> {
    leaves
        .iter()
        .find(|l| l.path == format!("spec.template.{p}"))
        .map(|l| l.shape.clone())
}

fn fixture() -> Doc {
    let text = include_str!("../../../tests/fixtures/openapi-core.json");
    Doc::new(&[serde_json::from_str(text).expect("the fixture is JSON")])
}

#[test]
fn a_pod_template_is_walked_from_the_cells_core_types() {
    let doc = fixture();
    let seed = one_container_seed();
    let leaves = template_leaves(&doc, "spec.template", &seed);
    let shape = |p: &str| template_shape(&leaves, p);
    // The seed's container is walked through; a union is also tried with no member.
    assert_eq!(
        shape("spec.containers[0].lifecycle.postStart"),
        Some(Shape::Object(json!({})))
    );
    assert!(matches!(
        shape("spec.containers[0].lifecycle.postStart.sleep.seconds"),
        Some(Shape::Integer { .. })
    ));
    assert_eq!(
        shape("spec.containers[0].lifecycle.postStart.httpGet.port"),
        Some(Shape::IntOrString)
    );
    assert_eq!(
        shape("spec.dnsPolicy"),
        Some(Shape::Enum(vec![
            "ClusterFirst".into(),
            "ClusterFirstWithHostNet".into(),
            "Default".into(),
            "None".into()
        ]))
    );
    assert_eq!(shape("metadata.labels"), Some(Shape::Map));
    assert_eq!(shape("metadata.name"), None, "metadata gives only its maps");
    // References name a kind the cell makes; a kind with a spec is not made bare.
    for (p, kind) in [
        ("spec.priorityClassName", "PriorityClass"),
        ("spec.imagePullSecrets[0].name", "Secret"),
        (
            "spec.containers[0].env[0].valueFrom.configMapKeyRef.name",
            "ConfigMap",
        ),
        ("spec.volumes[0].configMap.name", "ConfigMap"),
    ] {
        assert_eq!(shape(p), Some(Shape::Reference(kind.into())), "{p}");
    }
    assert!(matches!(
        shape("spec.volumes[0].persistentVolumeClaim.claimName"),
        Some(Shape::String(_))
    ));
    // A list of objects: empty and a minimal item; a second minimal item is not walked.
    assert_eq!(
        shape("spec.volumes"),
        Some(Shape::Objects(json!({"name": "x"})))
    );
    assert!(matches!(
        shape("spec.volumes[0].configMap.items"),
        Some(Shape::Objects(_))
    ));
    assert_eq!(shape("spec.volumes[0].configMap.items[0].key"), None);
    assert_eq!(
        shape("spec.serviceAccount"),
        None,
        "a deprecated field is not walked"
    );
    assert!(matches!(
        shape("spec.tolerations[0].effect"),
        Some(Shape::Enum(_))
    ));
    let v = Shape::Reference("ConfigMap".into()).values();
    assert_eq!(v, [json!(REFERENCED), json!("")]);
    // Free-form patches of a pod: valid ones on the seed's container, and invalid ones.
    let patches = pod_patches(&doc, &seed["spec"]["template"]);
    assert!(
        patches.len() <= MAX_PATCHES + MAX_PATCHES / 2,
        "{}",
        patches.len()
    );
    assert!(
        patches
            .iter()
            .any(|p| p["spec"]["containers"][0]["name"] == "main")
    );
    assert!(
        patches.contains(
            &json!({"spec": {"containers": [{"name": "main", "lifecycle": {"postStart": {}}}]}})
        ) || patches
            .iter()
            .any(|p| p.to_string().contains(&format!("{REFERENCED}-none")))
    );
}

#[test]
fn a_strings_words_are_the_literals_its_description_quotes() {
    let c = crd(json!({"type": "object", "properties": {
        "policy": {"type": "string", "description": "One of 'Always' or \"Never\"."},
        "ports": {"type": "array", "items": {"x-kubernetes-int-or-string": true}}}}));
    let l = leaves(&c, "v1");
    assert_eq!(
        l[0].shape,
        Shape::String(vec!["Always".into(), "Never".into()])
    );
    assert_eq!(
        l[0].shape.values(),
        [json!("Always"), json!("Never"), json!(NONSENSE), json!("")]
    );
    assert_eq!(
        l[1].shape,
        Shape::List(Box::new(Shape::IntOrString)),
        "int-or-string items are scalars"
    );
}

#[test]
fn values_follow_the_shape_and_optional_leaves_are_also_absent() {
    let replicas = Leaf {
        path: "spec.replicas".into(),
        shape: Shape::Integer {
            minimum: Some(0),
            maximum: None,
        },
        required: true,
    };
    let v = replicas.values();
    assert!(v.contains(&json!(-1)) && v.contains(&json!(0)) && v.contains(&json!(2147483647)));
    assert!(
        !v.contains(&Value::Null),
        "a required leaf is never removed"
    );
    assert_eq!(v.len(), 6, "bounds already tried are not repeated: {v:?}");
    assert_eq!(v[0], json!(1), "the typical value first: {v:?}");
    // The least the schema allows, within its maximum.
    for (minimum, maximum, first) in [(Some(5), Some(9), 5), (None, Some(-2), -2)] {
        assert_eq!(
            Shape::Integer { minimum, maximum }.values()[0],
            json!(first)
        );
    }
    let surge = Leaf {
        path: "spec.x".into(),
        shape: Shape::IntOrString,
        required: false,
    };
    let v = surge.values();
    for want in [json!("150%"), json!("1"), json!(0), Value::Null] {
        assert!(v.contains(&want), "{want} in {v:?}");
    }
    assert_eq!(v[0], json!(1), "the typical value first: {v:?}");
    let e = Shape::Enum(vec!["A".into()]).values();
    assert_eq!(e, vec![json!("A"), json!(NOT_A_MEMBER)]);
}

#[test]
fn a_nested_workload_template_walks_the_subjects_own_pod_template_only() {
    let doc = fixture();
    let c = crd(json!({"type": "object", "properties": {
        "jobTemplate": {"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}));
    let seed = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "containers": [{"name": "main", "image": "i"}]}}}}}});
    let paths = |template: &str| -> Vec<String> {
        let w = Walk {
            doc: Some(&doc),
            template,
            seed: &seed,
            pod: &Value::Null,
        };
        leaves_with(&c, "v1", &w)
            .into_iter()
            .map(|l| l.path)
            .collect()
    };
    let sleep = "spec.jobTemplate.spec.template.spec.containers[0].lifecycle.preStop.sleep.seconds";
    let own = paths("spec.jobTemplate.spec.template");
    assert!(own.iter().any(|p| p == sleep), "{own:?}");
    assert!(own.iter().any(|p| p == "spec.jobTemplate.metadata.labels"));
    // Undeclared below the CRD: the pod template is walked there too.
    let opaque = crd(json!({"type": "object", "properties": {
        "jobTemplate": {"x-kubernetes-preserve-unknown-fields": true}}}));
    let w = Walk {
        doc: Some(&doc),
        template: "spec.jobTemplate.spec.template",
        seed: &seed,
        pod: &Value::Null,
    };
    let undeclared: Vec<String> = leaves_with(&opaque, "v1", &w)
        .into_iter()
        .map(|l| l.path)
        .collect();
    assert!(undeclared.iter().any(|p| p == sleep), "{undeclared:?}");
    let other = paths("spec.template");
    assert!(
        !other.iter().any(|p| p == sleep),
        "not the subject's: {other:?}"
    );
    assert!(
        other
            .iter()
            .any(|p| p == "spec.jobTemplate.metadata.labels")
    );
}

#[test]
fn a_list_of_a_type_walked_already_tries_its_scalars_through_the_seeds_item() {
    let text = include_str!("../../../tests/fixtures/openapi-core.json");
    let mut core: Value = serde_json::from_str(text).expect("the fixture is JSON");
    let schemas = &mut core["components"]["schemas"];
    let containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"].clone();
    schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["initContainers"] = containers;
    schemas["io.k8s.api.core.v1.Container"]["properties"]["restartPolicy"] =
        json!({"type": "string", "description": "Set to \"Always\" for an init container."});
    let doc = Doc::new(&[core]);
    let seed = one_container_seed();
    let leaves = template_leaves(&doc, "spec.template", &seed);
    let shape = |p: &str| template_shape(&leaves, p);
    // The seed's container is walked through, objects and all.
    assert!(shape("spec.containers[0].restartPolicy").is_some());
    assert!(shape("spec.containers[0].lifecycle.postStart").is_some());
    // The other list of containers: its item is the seed's container renamed, and only its
    // scalar fields are tried through it.
    assert_eq!(
        shape("spec.initContainers"),
        Some(Shape::Objects(json!({"name": "x", "image": "i"})))
    );
    assert_eq!(
        shape("spec.initContainers[0].restartPolicy"),
        Some(Shape::String(vec!["Always".into()]))
    );
    assert!(shape("spec.initContainers[0].image").is_some());
    assert_eq!(shape("spec.initContainers[0].lifecycle"), None);
    assert_eq!(shape("spec.initContainers[0].lifecycle.postStart"), None);
    assert_eq!(shape("spec.initContainers[0].env"), None);
}

#[test]
fn a_map_of_quantities_is_tried_with_what_the_cells_nodes_offer() {
    let mut doc = fixture();
    let offered = BTreeMap::from([
        ("cpu".to_string(), "64".to_string()),
        ("memory".to_string(), "256Gi".to_string()),
    ]);
    doc.offer(&[offered]);
    let seed = one_container_seed();
    let leaves = template_leaves(&doc, "spec.template", &seed);
    let shares = BTreeMap::from([
        ("cpu".to_string(), "640m".to_string()),
        ("memory".to_string(), "2748779069".to_string()),
    ]);
    for p in ["requests", "limits"] {
        assert_eq!(
            template_shape(&leaves, &format!("spec.containers[0].resources.{p}")),
            Some(Shape::Quantities {
                stated: BTreeMap::new(),
                offered: shares.clone()
            }),
            "{p}"
        );
    }
    assert_eq!(
        Shape::Quantities {
            stated: BTreeMap::from([("storage".to_string(), "1Gi".to_string())]),
            offered: shares
        }
        .values(),
        [
            json!({}),
            json!({"storage": "2Gi"}),
            json!({"storage": "0.5Gi"}),
            json!({"cpu": "640m"}),
            json!({"memory": "2748779069"}),
            json!({"cpu": "640m", "memory": "2748779069"}),
            json!({MAP_KEY: "1"}),
        ]
    );
    // What the seed states at the map is read.
    let stating = json!({"spec": {"template": {"spec": {"containers": [{"name": "main",
        "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}}}});
    let stated = template_leaves(&doc, "spec.template", &stating);
    assert!(
        matches!(
            template_shape(&stated, "spec.containers[0].resources.requests"),
            Some(Shape::Quantities { stated, .. })
                if stated == BTreeMap::from([("cpu".to_string(), "100m".to_string())])
        ),
        "{stated:?}"
    );
    // A CRD's quantity (an integer or a string) makes a map of quantities too; a string map
    // stays one.
    let c = crd(json!({"type": "object", "properties": {
        "hard": {"type": "object", "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": true}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}));
    let w = Walk {
        doc: Some(&doc),
        template: "",
        seed: &Value::Null,
        pod: &Value::Null,
    };
    let shapes: Vec<(String, Shape)> = leaves_with(&c, "v1", &w)
        .into_iter()
        .map(|l| (l.path, l.shape))
        .collect();
    assert!(
        shapes.iter().any(|(p, s)| p == "spec.hard"
            && matches!(s, Shape::Quantities { offered, .. } if offered.len() == 2)),
        "{shapes:?}"
    );
    assert!(
        shapes.contains(&("spec.labels".to_string(), Shape::Map)),
        "{shapes:?}"
    );
}
