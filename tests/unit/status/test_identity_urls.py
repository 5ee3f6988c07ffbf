"""A namespace's broker Secret URLs, made from an administrator's, and read back."""

from __future__ import annotations

from asya.broker_identity import identity_urls, passwords_of


def test_the_namespaces_urls_keep_the_admins_hosts_and_name_its_own_users_and_vhost():
    amqp, management = identity_urls(
        "amqp://admin:s3cret@rabbitmq.messaging:5672/",
        "http://admin:s3cret@rabbitmq.messaging:15672/",
        "ml-b",
        "pw-a",
        "pw/k",
    )

    assert amqp == "amqp://asya.ml-b:pw-a@rabbitmq.messaging:5672/asya.ml-b"
    assert management == "http://asya.ml-b.keda:pw%2Fk@rabbitmq.messaging:15672/asya.ml-b"
    assert passwords_of(amqp, management) == ("pw-a", "pw/k")


def test_a_url_without_a_password_reads_as_an_empty_one():
    assert passwords_of("amqp://host:5672/", "http://host:15672/") == ("", "")
